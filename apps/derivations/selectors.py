"""Reads of derived artifacts (current tenant, by RLS)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from django.db.models import Count, Min, QuerySet
from django.utils import timezone

from apps.audit.models import DeletionReceipt
from apps.records.models import MemoryRecord
from apps.records.selectors import records_live

from .models import Embedding, Summary, SummarySource


def summary_get(summary_id: Any) -> Summary | None:
    """A summary by id, valid or not, or None (missing or another tenant's)."""
    try:
        pk = uuid.UUID(str(summary_id))
    except (ValueError, TypeError):
        return None
    return Summary.objects.filter(pk=pk).prefetch_related("sources").first()


def summary_source_expired_at(summary: Summary) -> datetime | None:
    """When the first record ``summary`` cites stopped being live (expired by its lifetime,
    its revoked consent or its closed run, and held by no legal hold), or None while every
    cited record is live. Deleted sources have invalidated it already."""
    cited = SummarySource.objects.filter(summary=summary, source_type="record").values("source_id")
    stale = MemoryRecord.objects.filter(pk__in=cited).exclude(pk__in=records_live().values("pk"))
    found = stale.aggregate(first=Min("expires_at"), count=Count("pk"))
    if not found["count"]:
        return None
    # A revoked consent's records carry the revocation's time as their expiry.
    first: datetime | None = found["first"]
    return first or timezone.now()


def summary_cites_expired(pk: uuid.UUID) -> bool:
    """Whether ``pk`` is a summary of the current tenant citing a version that has expired
    (a stored API response about it is then not replayed)."""
    expired = MemoryRecord.objects.exclude(pk__in=records_live().values("pk")).values("pk")
    cited = SummarySource.objects.filter(summary_id=pk, source_type="record")
    return cited.filter(source_id__in=expired).exists()


def derived_from_record(record: Any) -> dict[str, list[Any]]:
    """The summaries citing ``record`` (this version or, through its fact, any version) and the
    embeddings of this version: model, dimension and date, never the vector."""
    summary_ids = SummarySource.objects.filter(source_type="record", source_id=record.pk).values(
        "summary_id"
    )
    summaries = Summary.objects.filter(pk__in=summary_ids).order_by("-created_at")
    embeddings = Embedding.objects.filter(record_id=record.pk).order_by("model")
    return {
        "summaries": [
            {
                "id": str(s.pk),
                "valid": s.valid,
                "created_at": s.created_at,
                "invalidated_reason": s.invalidated_reason or None,
            }
            for s in summaries
        ],
        "embeddings": [
            {"model": e.model, "dimension": e.dimension, "created_at": e.created_at}
            for e in embeddings.only("model", "dimension", "created_at")
        ],
    }


def receipts(*, parent: str = "", kind: str = "") -> QuerySet[Any]:
    """The tenant's deletion receipts, optionally one erasure's or one kind's."""

    # A per-fact receipt shows its erasure's reclamation stamp (storage_reclaimed_at).
    queryset = DeletionReceipt.objects.select_related("parent")
    if parent:
        try:
            queryset = queryset.filter(parent_id=uuid.UUID(parent))
        except ValueError:
            return queryset.none()
    if kind:
        queryset = queryset.filter(kind=kind)
    return queryset


def receipt_get(receipt_id: Any) -> Any:
    try:
        pk = uuid.UUID(str(receipt_id))
    except (ValueError, TypeError):
        return None
    return DeletionReceipt.objects.select_related("parent").filter(pk=pk).first()
