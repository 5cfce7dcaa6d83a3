"""A dry run of a record's deletion: what ``record_delete`` would take with it, changing nothing.

The console shows this before a person confirms a deletion, so they see the cost of it: every
version of the fact, its observations, promotion requests and conflicts (open ones named),
the embeddings that go and the summaries that become invalid, and the queued work dropped.
It reads the same rows the deletion path touches (``apps.records.services._versions_delete``
and :mod:`apps.derivations.propagation`), in a fixed number of queries whatever their count.

A legal hold makes the deletion impossible; the preview says so, and by which hold.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.db.models import Count, Q
from django.utils import timezone

from .models import Embedding, OutboxMessage, Summary
from .propagation import summaries_citing

# Listed one by one on the confirmation page; beyond this, a count says how many more.
LISTED_AT_MOST = 50


@dataclass(frozen=True)
class EmbeddingGroup:
    model: str
    dimension: int
    count: int


@dataclass
class DeletionPreview:
    """What deleting one record (its whole fact) would remove or invalidate."""

    record_id: uuid.UUID
    fact_id: uuid.UUID
    holds: list[Any] = field(default_factory=list)
    versions: list[Any] = field(default_factory=list)
    observations: int = 0
    promotion_requests: int = 0
    open_promotion_requests: list[Any] = field(default_factory=list)
    conflicts: int = 0
    open_conflicts: list[Any] = field(default_factory=list)
    record_embeddings: list[EmbeddingGroup] = field(default_factory=list)
    summaries_to_invalidate: list[Any] = field(default_factory=list)
    summaries_to_invalidate_count: int = 0
    summaries_already_invalid: int = 0
    summary_embeddings: int = 0
    queued_work: int = 0

    @property
    def held(self) -> bool:
        return bool(self.holds)

    @property
    def embeddings_total(self) -> int:
        return sum(group.count for group in self.record_embeddings) + self.summary_embeddings


def deletion_preview(record: Any) -> DeletionPreview:
    """What ``record_delete(record=record, ...)`` would do now, for the current tenant (RLS).

    Every version of the record's fact counts, expired or superseded ones included, because
    the deletion takes the whole fact.
    """
    from apps.records.models import (
        Conflict,
        ConflictState,
        LegalHold,
        MemoryRecord,
        Observation,
        PromotionRequest,
        PromotionState,
    )

    preview = DeletionPreview(record_id=record.pk, fact_id=record.fact_id)
    preview.holds = list(
        LegalHold.objects.filter(lifted_at__isnull=True)
        .filter(Q(subject=record.subject) | Q(fact_id=record.fact_id))
        .order_by("placed_at")
        .only("id", "subject", "fact_id", "reason", "placed_by_label", "placed_at")
    )
    preview.versions = list(
        MemoryRecord.objects.filter(fact_id=record.fact_id)
        .order_by("version")
        .only("id", "fact_id", "version", "status", "trust", "written_at", "expires_at")
    )
    version_ids = [version.pk for version in preview.versions]
    preview.observations = Observation.objects.filter(record_id__in=version_ids).count()

    requests = list(
        PromotionRequest.objects.filter(record_id__in=version_ids)
        .order_by("-requested_at")
        .only("id", "record_id", "state", "requested_at", "requested_by_label")
    )
    preview.promotion_requests = len(requests)
    preview.open_promotion_requests = [r for r in requests if r.state == PromotionState.OPEN]

    conflicts = list(
        Conflict.objects.filter(
            Q(current_record_id__in=version_ids) | Q(contender_id__in=version_ids)
        )
        .order_by("-opened_at")
        .only("id", "state", "opened_at", "current_record_id", "contender_id")
    )
    preview.conflicts = len(conflicts)
    preview.open_conflicts = [c for c in conflicts if c.state == ConflictState.OPEN]

    preview.record_embeddings = [
        EmbeddingGroup(row["model"], row["dimension"], row["count"])
        for row in Embedding.objects.filter(record_id__in=version_ids)
        .values("model", "dimension")
        .annotate(count=Count("id"))
        .order_by("model")
    ]

    summary_ids = list(dict.fromkeys(summaries_citing(version_ids, [record.fact_id])))
    citing = Summary.objects.filter(pk__in=summary_ids)
    counts = citing.aggregate(
        still_valid=Count("id", filter=Q(valid=True)),
        already_invalid=Count("id", filter=Q(valid=False)),
    )
    preview.summaries_to_invalidate_count = counts["still_valid"] or 0
    preview.summaries_already_invalid = counts["already_invalid"] or 0
    preview.summaries_to_invalidate = list(
        citing.filter(valid=True)
        .order_by("-created_at")
        .only("id", "created_at", "reason", "sensitivity", "writer_label")[:LISTED_AT_MOST]
    )
    preview.summary_embeddings = Embedding.objects.filter(summary_id__in=summary_ids).count()
    preview.queued_work = OutboxMessage.objects.filter(
        object_id__in=[*version_ids, *summary_ids]
    ).count()
    return preview


# A receipt is looked up for a record that has just gone (a repeated confirmation, or another
# person deleting it first). Only recent receipts are searched, through their time index.
RECENT_RECEIPTS = timedelta(days=1)


def receipt_of_deleted_record(record_id: uuid.UUID) -> Any:
    """The deletion receipt that names ``record_id`` (current tenant), or None.

    First by the deletion's audit event (indexed by object id: the record that was asked
    for), then among the last day's receipts (any version of the deleted fact).
    """
    from apps.audit.models import AuditEvent, DeletionReceipt

    event = (
        AuditEvent.objects.filter(object_id=str(record_id), action="record.delete")
        .order_by("-seq")
        .only("data")
        .first()
    )
    receipt_id = (event.data or {}).get("receipt") if event is not None else None
    if receipt_id:
        receipt = DeletionReceipt.objects.filter(pk=receipt_id).first()
        if receipt is not None:
            return receipt
    return (
        DeletionReceipt.objects.filter(
            deleted_at__gte=timezone.now() - RECENT_RECEIPTS,
            record_ids__contains=[str(record_id)],
        )
        .order_by("-deleted_at")
        .first()
    )
