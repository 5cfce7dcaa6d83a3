"""A dry run of a record's deletion: what ``record_delete`` would take with it, changing nothing.

The console shows it before a person confirms, so they see the cost: every version of the
fact, its observations, promotion requests and conflicts (open ones named), the embeddings
that go, the summaries that become invalid, the queued work dropped. It reads the rows the
deletion definition reaches (:mod:`apps.core.deletion`) in a fixed number of queries; a legal
hold makes the deletion impossible, and the preview names it. The same reading over many
facts is an erasure's dry run (``apps.governance.erasure.erasure_preview``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.db.models import Count, QuerySet
from django.utils import timezone

from apps.audit.models import AuditEvent, DeletionReceipt
from apps.core import deletion
from apps.derivations.models import Embedding, Summary
from apps.records.models import (
    Conflict,
    ConflictState,
    Fact,
    MemoryRecord,
    PromotionRequest,
    PromotionState,
)
from apps.records.selectors import record_active_holds

# Listed one by one on the confirmation page; beyond this, a count says how many more.
LISTED_AT_MOST = 50


@dataclass(frozen=True)
class EmbeddingGroup:
    model: str
    dimension: int
    count: int


@dataclass
class DeletionPreview:
    """What deleting whole facts (a record's, or an erasure's) would remove or invalidate.
    Counts are complete; lists stop at their limit."""

    record_id: uuid.UUID | None = None
    fact_id: uuid.UUID | None = None
    holds: list[Any] = field(default_factory=list)
    facts: int = 0
    fact_ids: list[Any] = field(default_factory=list)
    versions: list[Any] = field(default_factory=list)
    version_count: int = 0
    observations: int = 0
    promotion_requests: int = 0
    promotion_events: int = 0
    open_promotion_requests: list[Any] = field(default_factory=list)
    conflicts: int = 0
    open_conflicts: list[Any] = field(default_factory=list)
    record_embeddings: list[EmbeddingGroup] = field(default_factory=list)
    summaries_to_invalidate: list[Any] = field(default_factory=list)
    summaries_to_invalidate_count: int = 0
    summaries_already_invalid: int = 0
    summary_embeddings: int = 0
    queued_work: int = 0
    stored_responses: int = 0

    @property
    def held(self) -> bool:
        return bool(self.holds)

    @property
    def embeddings_total(self) -> int:
        return sum(group.count for group in self.record_embeddings) + self.summary_embeddings

    def counts(self) -> dict[str, int]:
        """The counts under the names a deletion receipt's counts use (the definition's)."""
        return {
            "versions": self.version_count,
            "observations": self.observations,
            "promotion_events": self.promotion_events,
            "promotion_requests": self.promotion_requests,
            "conflicts": self.conflicts,
            "stored_responses": self.stored_responses,
            "embeddings": self.embeddings_total,
            "summaries_invalidated": self.summaries_to_invalidate_count,
            "outbox": self.queued_work,
        }

    def totals(self) -> dict[str, int]:
        """The counts under the names an erasure's totals use (``erasure.TOTALS``)."""
        counts = self.counts()
        return {"facts": self.facts, "records": counts.pop("versions"), **counts}


def deletion_preview(record: Any) -> DeletionPreview:
    """What ``record_delete(record=record, ...)`` would do now: every version of its fact
    counts, expired or superseded ones included, because the deletion takes the whole fact."""
    preview = facts_deletion_preview([record.fact_id], listed=LISTED_AT_MOST)
    preview.record_id = record.pk
    preview.fact_id = record.fact_id
    preview.holds = record_active_holds(record)
    return preview


def _listed(queryset: QuerySet[Any], listed: int) -> tuple[list[Any], int]:
    """The first ``listed`` rows and the count of all (counted only when there are more)."""
    rows = list(queryset[: listed + 1])
    if len(rows) <= listed:
        return rows, len(rows)
    return rows[:listed], queryset.count()


def _listed_open(queryset: QuerySet[Any], open_state: str, listed: int) -> tuple[list[Any], int]:
    """The first ``listed`` rows in ``open_state`` and the count of all rows."""
    rows, total = _listed(queryset, listed)
    if total == len(rows):
        return [row for row in rows if row.state == open_state], total
    return list(queryset.filter(state=open_state)[:listed]), total


def facts_deletion_preview(facts: QuerySet[Any] | list[Any], *, listed: int) -> DeletionPreview:
    """What deleting the whole facts ``facts`` (ids, or a queryset) would do now: the rows the
    deletion plan reaches (:class:`apps.core.deletion.Plan`), counted in a fixed number of
    queries; ``listed`` bounds each list of ids."""

    fact_set = Fact.objects.filter(pk__in=facts)
    versions = MemoryRecord.objects.filter(fact_id__in=fact_set.values("pk"))
    plan = deletion.Plan(deleted={Fact: fact_set.values("pk"), MemoryRecord: versions.values("pk")})
    counts = plan.counts()
    preview = DeletionPreview()
    preview.fact_ids, preview.facts = _listed(
        fact_set.order_by("pk").values_list("pk", flat=True), listed
    )
    preview.versions, preview.version_count = _listed(
        versions.order_by("fact_id", "version").only(
            "id", "fact_id", "version", "status", "trust", "written_at", "expires_at"
        ),
        listed,
    )
    preview.observations = counts.get("observations", 0)
    preview.promotion_events = counts.get("promotion_events", 0)
    preview.open_promotion_requests, preview.promotion_requests = _listed_open(
        PromotionRequest.objects.filter(pk__in=plan.deleted(PromotionRequest))
        .order_by("-requested_at")
        .only("id", "record_id", "state", "requested_at", "requested_by_label"),
        PromotionState.OPEN,
        listed,
    )
    preview.open_conflicts, preview.conflicts = _listed_open(
        Conflict.objects.filter(pk__in=plan.deleted(Conflict))
        .order_by("-opened_at")
        .only("id", "state", "opened_at", "current_record_id", "contender_id"),
        ConflictState.OPEN,
        listed,
    )
    record_embeddings = Embedding.objects.filter(pk__in=plan.deleted(Embedding)).exclude(
        record_id=None
    )
    preview.record_embeddings = [
        EmbeddingGroup(row["model"], row["dimension"], row["count"])
        for row in record_embeddings.values("model", "dimension")
        .annotate(count=Count("id"))
        .order_by("model")
    ]
    preview.summary_embeddings = counts.get("embeddings", 0) - sum(
        group.count for group in preview.record_embeddings
    )
    citing = Summary.objects.filter(pk__in=plan.withdrawn(Summary))
    preview.summaries_to_invalidate_count = counts.get("summaries_invalidated", 0)
    preview.summaries_already_invalid = citing.filter(valid=False).count()
    preview.summaries_to_invalidate = list(
        citing.filter(valid=True)
        .order_by("-created_at")
        .only("id", "created_at", "reason", "sensitivity", "writer_label")[:listed]
    )
    preview.queued_work = counts.get("outbox", 0)
    preview.stored_responses = counts.get("stored_responses", 0)
    return preview


# A receipt is looked up for a record that has just gone (a repeated confirmation, or another
# person deleting it first). Only recent receipts are searched, through their time index.
RECENT_RECEIPTS = timedelta(days=1)


def receipt_of_deleted_record(record_id: uuid.UUID) -> Any:
    """The deletion receipt that names ``record_id``, or None: by the deletion's audit event
    (indexed by object id: the record asked for), else among the last day's receipts (any
    version of the deleted fact)."""
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
