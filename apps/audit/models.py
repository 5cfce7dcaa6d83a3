"""The audit log: append-only, hash-chained per tenant."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import ClassVar

from django.contrib.postgres.indexes import GinIndex
from django.db import models

from apps.core import deletion
from apps.core.actors import ActorType
from apps.tenancy.models import Tenant, TenantOwned


class AuditEvent(TenantOwned):
    """One state transition. Never updated or deleted (the application role lacks the rights).

    ``data`` holds ids, counts and field names, never memory content; ``digest`` is a SHA-256
    of the change so it can be matched later without keeping it. ``hash`` covers this event and
    ``prev_hash``, so rewriting any past event breaks every later link
    (``memoryconsole audit-verify``).

    A tenant's chain is braided from ``LANES`` strands: each event links to the previous event
    of its lane. Appending locks one lane's head until commit, so writers to different objects
    of one tenant do not queue behind a single lock, while every event is still covered by a
    hash chain and a lane's head pins its length (a truncated tail is detected too). ``seq``
    orders all events (a database sequence: increasing, not gapless).
    """

    append_only = True

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    seq = models.BigIntegerField()
    lane = models.SmallIntegerField(default=0)
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

    deletion_rules = deletion.Rules(
        unrelated={"object_id": "what the event is about: the audit log is never deleted"}
    )

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
    """The latest link of one lane of a tenant's chain, and how many events the lane holds;
    locked to append, so a lane never forks."""

    id = models.BigAutoField(primary_key=True)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+")
    lane = models.SmallIntegerField()
    count = models.BigIntegerField(default=0)
    hash = models.CharField(max_length=64)

    class Meta:
        constraints: ClassVar[list[models.BaseConstraint]] = [
            models.UniqueConstraint(fields=["tenant", "lane"], name="audit_head_per_lane")
        ]

    def __str__(self) -> str:
        return f"{self.tenant_id} lane {self.lane} ({self.count} events)"


class DeletionReceipt(TenantOwned):
    """Proof of a deletion: what went (ids and counts), who asked, why, when, and a digest of
    the removed content for later verification. Never the content itself."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    kind = models.CharField(max_length=32, default="record")  # record | erasure | expiry
    requested_by_type = models.CharField(max_length=16)
    requested_by_id = models.CharField(max_length=64, blank=True)
    requested_by_label = models.CharField(max_length=200, blank=True)
    reason = models.TextField()
    deleted_at = models.DateTimeField()
    fact_id = models.UUIDField(null=True, blank=True)
    record_ids = models.JSONField(default=list)
    counts = models.JSONField(default=dict)
    content_digest = models.CharField(max_length=64, blank=True)
    # Which subject's memory the deletion changed, and since when that memory held what went,
    # so an ``as_of`` read can say a deletion covers its moment: a digest, never the subject.
    subject_digest = models.CharField(max_length=64, blank=True, default="", db_default="")
    written_from = models.DateTimeField(null=True, blank=True)
    reclaimed_at = models.DateTimeField(null=True, blank=True)
    # When the tables were rewritten after the deletion (VACUUM FULL: the pages that held the
    # deleted rows, and every index, the full-text one included, written anew): from then on
    # no data file holds the deleted bytes. A vacuum only marks their space reusable.
    rewritten_at = models.DateTimeField(null=True, blank=True)
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="children"
    )

    deletion_rules = deletion.Rules(
        unrelated={"fact_id": "a receipt keeps the ids it proves deleted (never their content)"}
    )

    class Meta:
        indexes: ClassVar[list[models.Index]] = [
            models.Index(fields=["tenant", "deleted_at"], name="receipt_tenant_time"),
            # The console's deletion history lists top-level receipts newest first; without
            # this, an erasure's 100k per-fact receipts would be scanned past on every page.
            models.Index(
                fields=["tenant", "-deleted_at", "-id"],
                condition=models.Q(parent__isnull=True),
                name="receipt_tenant_top_time",
            ),
            # facts/check tells a deleted version from one that never existed by its id.
            GinIndex(
                fields=["record_ids"], name="receipt_record_ids", opclasses=["jsonb_path_ops"]
            ),
            models.Index(
                fields=["tenant", "subject_digest", "deleted_at"],
                condition=~models.Q(subject_digest=""),
                name="receipt_tenant_subject",
            ),
        ]

    @property
    def storage_reclaimed_at(self) -> datetime | None:
        """When the deleted rows were physically reclaimed (None: not yet).

        Reclamation stamps top-level receipts only: an erasure's per-fact receipts commit with
        their erasure's receipt (one transaction), whose ``deleted_at`` is set as it ends, so
        the vacuum that reclaimed the erasure reclaimed every one of them. Stamping the
        erasure's receipt alone keeps reclamation's bookkeeping one row per deletion, not one
        per erased fact (which took seconds for a large erasure: docs/performance.md)."""
        return self._stamp("reclaimed_at")

    @property
    def storage_rewritten_at(self) -> datetime | None:
        """When no data file held the deleted rows any more (None: not yet); an erasure's
        per-fact receipts read their erasure's stamp, as for :attr:`storage_reclaimed_at`."""
        return self._stamp("rewritten_at")

    def _stamp(self, name: str) -> datetime | None:
        stamp: datetime | None = getattr(self, name)
        if stamp is None and self.parent_id is not None and self.parent is not None:
            stamp = getattr(self.parent, name)
        return stamp

    def __str__(self) -> str:
        return f"receipt {self.pk} ({self.kind})"


class ErasureLedgerEntry(models.Model):
    """What one erasure, deletion, redaction, run close or consent revocation removed, by id
    (a revocation: its consent reference, which it refuses from then on): the record a
    restore reads to re-apply it (:mod:`apps.governance.ledger`), so restoring a backup
    taken before it never brings the removed data back.

    ``memoryconsole restore`` keeps this table as it is and restores everything else, so
    the ledger outlives every backup it postdates. It is written in the removal's own
    transaction (no removal without its entry, no entry for one rolled back) and holds ids,
    field paths and the reason: never content. ``tenant_id`` is a bare column, not a foreign
    key, so that restoring the tenants' table from an older backup leaves it untouched.
    """

    append_only = True

    class Kind(models.TextChoices):
        ERASURE = "erasure"
        DELETION = "deletion"
        REDACTION = "redaction"
        RUN_CLOSE = "run_close"
        CONSENT_REVOKE = "consent_revoke"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant_id = models.UUIDField()
    recorded_at = models.DateTimeField()
    kind = models.CharField(max_length=16, choices=Kind.choices)
    # The receipt (or audit event) the removal left, for the operator to match them up.
    reference = models.CharField(max_length=64, blank=True)
    reason = models.TextField(blank=True)
    # Ids by name (facts, records, runs, obligations), for a redaction its fields, for a
    # consent revocation its reference (``consent_refs``).
    target = models.JSONField()

    deletion_rules = deletion.Rules(
        unrelated={
            "target": "the ledger keeps the ids it re-applies a removal to",
            "tenant_id": "a tenant, not subject data: no foreign key, so a restore keeps it",
        }
    )

    class Meta:
        db_table = "audit_erasureledger"
        indexes: ClassVar[list[models.Index]] = [
            models.Index(fields=["tenant_id", "recorded_at"], name="ledger_tenant_time"),
        ]

    def __str__(self) -> str:
        return f"ledger {self.kind} {self.reference} at {self.recorded_at:%Y-%m-%d %H:%M:%S}"
