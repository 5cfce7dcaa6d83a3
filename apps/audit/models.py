"""The audit log: append-only, hash-chained per tenant."""

from __future__ import annotations

import uuid
from typing import ClassVar

from django.db import models

from apps.tenancy.models import Tenant, TenantOwned


class ActorType(models.TextChoices):
    USER = "user", "person"
    CREDENTIAL = "credential", "agent credential"
    SYSTEM = "system", "system"


class AuditEvent(TenantOwned):
    """One state transition. Never updated or deleted (the application role lacks the rights).

    ``data`` holds ids, counts and field names, never memory content; ``digest`` is a SHA-256
    of the change so it can be matched later without keeping it. ``hash`` covers this event and
    ``prev_hash``, so rewriting any past event breaks every later link
    (``memoryconsole audit-verify``).
    """

    append_only = True

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    seq = models.BigIntegerField()
    occurred_at = models.DateTimeField()
    actor_type = models.CharField(max_length=16, choices=ActorType.choices)
    actor_id = models.CharField(max_length=64, blank=True)
    actor_label = models.CharField(max_length=200, blank=True)
    action = models.CharField(max_length=64)
    object_type = models.CharField(max_length=64, blank=True)
    object_id = models.CharField(max_length=64, blank=True)
    digest = models.CharField(max_length=64, blank=True)
    data = models.JSONField(default=dict, blank=True)
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64)

    class Meta:
        ordering = ["-seq"]
        constraints: ClassVar[list[models.BaseConstraint]] = [
            models.UniqueConstraint(fields=["tenant", "seq"], name="audit_event_seq_per_tenant")
        ]
        indexes: ClassVar[list[models.Index]] = [
            models.Index(fields=["tenant", "action", "seq"], name="audit_tenant_action"),
            models.Index(fields=["tenant", "object_id"], name="audit_tenant_object"),
            models.Index(fields=["tenant", "occurred_at"], name="audit_tenant_time"),
        ]

    def __str__(self) -> str:
        return f"#{self.seq} {self.action} {self.object_type}:{self.object_id}"


class AuditChainHead(models.Model):
    """The latest link of a tenant's chain; locked to append, so links never fork."""

    tenant = models.OneToOneField(
        Tenant, primary_key=True, on_delete=models.PROTECT, related_name="+"
    )
    seq = models.BigIntegerField(default=0)
    hash = models.CharField(max_length=64)

    def __str__(self) -> str:
        return f"{self.tenant_id} at #{self.seq}"
