"""Reads of memory records. Every one applies the expiry predicate; RLS applies the tenant."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Prefetch, Q, QuerySet
from django.utils import timezone

from .models import (
    Conflict,
    ConflictState,
    MemoryRecord,
    Observation,
    PromotionRequest,
    RecordStatus,
)
from .retention import live_q


def records_live(now: datetime | None = None) -> QuerySet[MemoryRecord]:
    """Every record of the current tenant that has not expired (or is under legal hold)."""
    return MemoryRecord.objects.filter(live_q(now))


def record_get(record_id: Any) -> MemoryRecord | None:
    """A live record by id, or None (missing, expired, deleted, or another tenant's)."""
    try:
        pk = uuid.UUID(str(record_id))
    except (ValueError, TypeError):
        return None
    return (
        records_live()
        .filter(pk=pk)
        .prefetch_related(Prefetch("observations", Observation.objects.order_by("recorded_at")))
        .first()
    )


RECORD_FILTERS = ("subject", "key", "domain", "task_type", "trust", "status", "sensitivity")


def records_list(filters: dict[str, str]) -> QuerySet[MemoryRecord]:
    queryset = records_live()
    mapping = {
        "subject": "subject",
        "key": "key",
        "domain": "scope_domain",
        "task_type": "scope_task_type",
        "trust": "trust",
        "status": "status",
        "sensitivity": "sensitivity",
    }
    for name, column in mapping.items():
        if filters.get(name):
            queryset = queryset.filter(**{column: filters[name]})
    return queryset


def record_history(record: MemoryRecord) -> QuerySet[MemoryRecord]:
    """Every live version of the record's fact, oldest first."""
    return records_live().filter(fact_id=record.fact_id).order_by("version")


def open_conflict_contender_ids(fact_ids: list[uuid.UUID]) -> set[uuid.UUID]:
    return set(
        Conflict.objects.filter(fact_id__in=fact_ids, state=ConflictState.OPEN).values_list(
            "contender_id", flat=True
        )
    )


def facts_current(subject: str, as_of: datetime | None = None) -> list[MemoryRecord]:
    """The current version of each key of ``subject``; never superseded or expired ones.

    With ``as_of``: the versions that were current at that moment (system time), among those
    not expired at that moment.
    """
    if as_of is None:
        return list(
            records_live()
            .filter(
                subject=subject,
                is_current=True,
                status__in=[RecordStatus.ACTIVE, RecordStatus.REDACTED],
            )
            .order_by("key")
        )
    now = timezone.now()
    return list(
        records_live(now)
        .filter(subject=subject, current_from__lte=as_of)
        .filter(Q(current_until__isnull=True) | Q(current_until__gt=as_of))
        .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=as_of))
        .order_by("key")
    )


@dataclass(frozen=True)
class FactCheck:
    id: str
    version: int | None
    found: bool
    current: bool
    status: str | None
    current_id: str | None
    current_version: int | None


def facts_check(items: list[tuple[uuid.UUID, int | None]]) -> list[FactCheck]:
    """For each (record id, version): is it still the current value of its fact?"""
    ids = [pk for pk, _ in items]
    records = {r.pk: r for r in records_live().filter(pk__in=ids).select_related("fact")}
    current_ids = {r.fact.current_id for r in records.values() if r.fact.current_id}
    currents = {r.pk: r for r in records_live().filter(pk__in=current_ids)}
    out: list[FactCheck] = []
    for pk, version in items:
        record = records.get(pk)
        if record is None:
            out.append(FactCheck(str(pk), version, False, False, None, None, None))
            continue
        head = currents.get(record.fact.current_id) if record.fact.current_id else None
        is_current = (
            head is not None
            and head.pk == record.pk
            and (version is None or version == record.version)
        )
        out.append(
            FactCheck(
                id=str(pk),
                version=version,
                found=True,
                current=is_current,
                status=record.status,
                current_id=str(head.pk) if head else None,
                current_version=head.version if head else None,
            )
        )
    return out


def promotion_requests(state: str | None) -> QuerySet[PromotionRequest]:
    queryset = PromotionRequest.objects.select_related("record").filter(record__in=records_live())
    if state:
        queryset = queryset.filter(state=state)
    return queryset.order_by("-requested_at", "-id")


def conflicts(state: str | None) -> QuerySet[Conflict]:
    """Conflicts between live versions: one whose side has expired is moot, and showing it
    would return the expired record's content."""
    live = records_live()
    queryset = Conflict.objects.select_related("current_record", "contender", "fact").filter(
        current_record__in=live, contender__in=live
    )
    if state:
        queryset = queryset.filter(state=state)
    return queryset.order_by("-opened_at", "-id")


def derived_artifacts(record: MemoryRecord) -> dict[str, list[Any]]:
    """Summaries and embeddings derived from the record (filled in by the derivations app)."""
    from apps.derivations.selectors import derived_from_record

    return derived_from_record(record)
