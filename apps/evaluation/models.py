"""Evaluation runs: a scenario set run in a sandbox beside a cache, with its figures."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import ClassVar

from django.db import models
from django.utils import timezone

from apps.core import deletion
from apps.tenancy.models import TenantOwned
from apps.work.models import QUEUED_WORK

# A run whose progress has not moved for this long lost its worker; a later delivery of its
# message starts it again (its sandbox went with the dead worker's connection).
STALLED_AFTER = timedelta(minutes=10)


class EvaluationRunState(models.TextChoices):
    QUEUED = "queued", "queued"
    RUNNING = "running", "running"
    DONE = "done", "done"
    FAILED = "failed", "failed"


class EvaluationRun(TenantOwned):
    """One run of a scenario set for a tenant: who asked, its progress while it runs, and its
    figures once done (``results``, as ``memoryconsole evaluate --json`` writes them).

    The scenarios themselves ran in a sandbox tenant that is gone; nothing here is memory
    content, only counts, rates, scenario ids and the names of places probed. ``passed`` says
    whether every threshold of the scenario set held.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    state = models.CharField(
        max_length=16, choices=EvaluationRunState.choices, default=EvaluationRunState.QUEUED
    )
    scenario_set = models.CharField(max_length=300)
    scenario_digest = models.CharField(max_length=64, blank=True)
    against_cache = models.BooleanField(default=True)
    requested_by_type = models.CharField(max_length=16)
    requested_by_id = models.CharField(max_length=64, blank=True)
    requested_by_label = models.CharField(max_length=200, blank=True)
    requested_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # When the run last reported progress: a run that stops moving lost its worker.
    updated_at = models.DateTimeField(null=True, blank=True)
    progress_phase = models.CharField(max_length=100, blank=True)
    progress_done = models.PositiveIntegerField(default=0)
    progress_total = models.PositiveIntegerField(default=0)
    results = models.JSONField(null=True, blank=True)
    passed = models.BooleanField(null=True, blank=True)
    error = models.TextField(blank=True)

    # Its queued run goes with it.
    deletion_rules = deletion.Rules(named_by=(QUEUED_WORK,))

    class Meta:
        indexes: ClassVar[list[models.Index]] = [
            models.Index(fields=["tenant", "requested_at"], name="evaluationrun_tenant_time"),
        ]

    def __str__(self) -> str:
        return f"evaluation {self.pk} ({self.state})"

    @property
    def finished(self) -> bool:
        return self.state in {EvaluationRunState.DONE, EvaluationRunState.FAILED}

    @property
    def stalled(self) -> bool:
        """Running, but no progress for a while: the worker running it has stopped."""
        last = self.updated_at or self.started_at or self.requested_at
        return (
            self.state == EvaluationRunState.RUNNING
            and last is not None
            and timezone.now() - last > STALLED_AFTER
        )

    @property
    def percent(self) -> int:
        if self.state == EvaluationRunState.DONE:
            return 100
        if not self.progress_total:
            return 0
        return min(99, int(100 * self.progress_done / self.progress_total))
