"""Governance's own rows: erasure jobs.

Retention rules, legal holds and consent revocations stay in ``apps.records``: a record's
lifetime is computed from the retention rules at write, and whether a record is live (every
read's predicate) asks whether a hold keeps it or its consent was revoked.
"""

from __future__ import annotations

import uuid
from typing import ClassVar

from django.db import models

from apps.audit.models import DeletionReceipt
from apps.core import deletion
from apps.tenancy.models import TenantOwned
from apps.work.models import QUEUED_WORK


class ErasureJobState(models.TextChoices):
    QUEUED = "queued", "queued"
    RUNNING = "running", "running"
    DONE = "done", "done"
    FAILED = "failed", "failed"


class ErasureJob(TenantOwned):
    """An erasure too large for a request, run by the worker, whichever door (the console or
    ``POST /api/v1/erasures``) asked for it. ``value`` (an identifier, never content) is kept
    until the erasure commits, then only its digest. The erasure commits whole, so
    ``records_erased`` goes from 0 to the total at once."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    state = models.CharField(
        max_length=16, choices=ErasureJobState.choices, default=ErasureJobState.QUEUED
    )
    selector = models.CharField(max_length=16)  # subject | owner | consent_ref
    value = models.CharField(max_length=200, blank=True)
    value_digest = models.CharField(max_length=64)
    reason = models.TextField()
    requested_by_type = models.CharField(max_length=16)
    requested_by_id = models.CharField(max_length=64, blank=True)
    requested_by_label = models.CharField(max_length=200, blank=True)
    requested_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    records_matched = models.PositiveIntegerField(default=0)
    records_erased = models.PositiveIntegerField(default=0)
    totals = models.JSONField(null=True, blank=True)
    receipt = models.ForeignKey(
        DeletionReceipt, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    error = models.TextField(blank=True)

    # It holds the identifier erased by until the erasure commits (then only its digest).
    deletion_rules = deletion.Rules(subject_data=True, named_by=(QUEUED_WORK,))

    class Meta:
        # The table it was created with, when the model lived in another app.
        db_table = "derivations_erasurejob"
        indexes: ClassVar[list[models.Index]] = [
            models.Index(fields=["tenant", "requested_at"], name="erasurejob_tenant_requested"),
        ]

    def __str__(self) -> str:
        return f"erasure by {self.selector} ({self.state})"

    @property
    def finished(self) -> bool:
        return self.state in {ErasureJobState.DONE, ErasureJobState.FAILED}

    @property
    def selector_label(self) -> str:
        return {"consent_ref": "consent reference"}.get(self.selector, self.selector)
