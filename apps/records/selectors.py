"""Reads of memory records. Every one applies the expiry predicate; RLS applies the tenant."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, Prefetch, Q, QuerySet, prefetch_related_objects
from django.db.models.functions import Substr
from django.utils import timezone

from apps.audit.models import DeletionReceipt
from apps.audit.services import subject_digest
from apps.core.pagination import Cursor

from . import signals
from .models import (
    Conflict,
    ConflictState,
    Fact,
    LegalHold,
    MemoryRecord,
    MemoryRecordQuerySet,
    Observation,
    PromotionRequest,
    PromotionState,
    RecordStatus,
    Scope,
    Sensitivity,
    Trust,
)
from .predicates import record_predicate_sql
from .trust import Confirmation, UnsafeReason, decision_trust_annotate


def records_live(now: datetime | None = None) -> MemoryRecordQuerySet:
    return MemoryRecord.objects.live(now)


def expired_since(pk: uuid.UUID) -> bool:
    """Whether ``pk`` is a version of the current tenant that has expired, or a conflict
    one of whose versions has (a stored API response about it is then not replayed)."""
    live = records_live().values("pk")
    if MemoryRecord.objects.filter(pk=pk).exclude(pk__in=live).exists():
        return True
    return (
        Conflict.objects.filter(pk=pk)
        .exclude(current_record_id__in=live, contender_id__in=live)
        .exists()
    )


def record_get(
    record_id: Any, *, sees_restricted: bool, observations: bool = True
) -> MemoryRecord | None:
    """A live record by id that the reader may see, or None. ``observations``: with its
    observations prefetched, oldest first (the console shows them; the API reads its own).

    ``records_live().visible(...).filter(pk=...).first()`` as one statement with the live
    predicate's compiled clause: the queryset took two to three times as long to build as
    the statement to run, on every read or delete by id (docs/performance.md, "Request
    path"); a test holds the two equal."""
    try:
        pk = uuid.UUID(str(record_id))
    except (ValueError, TypeError):
        return None
    params: dict[str, Any] = {"id": pk, "now": timezone.now()}
    condition = f"r.id = %(id)s AND {record_predicate_sql('live', 'r', params)}"
    if not sees_restricted:
        condition += " AND r.sensitivity <> %(restricted)s"
        params["restricted"] = Sensitivity.RESTRICTED.value
    found = next(
        iter(MemoryRecord.objects.raw(RECORD_BY_ID_SQL.format(condition=condition), params)),
        None,
    )
    if found is not None and observations:
        prefetch_related_objects(
            [found], Prefetch("observations", Observation.objects.order_by("recorded_at"))
        )
    return found


RECORD_BY_ID_SQL = f"SELECT r.* FROM {MemoryRecord._meta.db_table} r WHERE {{condition}} LIMIT 1"  # noqa: S608 (a model's table)


RECORD_FILTERS = ("subject", "key", "domain", "task_type", "trust", "status", "sensitivity")


def records_list(filters: dict[str, str], *, sees_restricted: bool) -> QuerySet[MemoryRecord]:
    """Live records matching ``filters`` that the reader may see; ``versions="current"``
    keeps only current versions, ``expiring_within`` (days, as text) only those whose
    lifetime ends within that window."""
    now = timezone.now()
    queryset = records_live(now).visible(sees_restricted=sees_restricted)
    if filters.get("versions") == "current":
        queryset = queryset.current()
    if (days := filters.get("expiring_within", "")).isdigit():
        queryset = queryset.filter(
            expires_at__gt=now, expires_at__lte=now + timedelta(days=int(days))
        )
    for name in RECORD_FILTERS:
        if filters.get(name):
            column = f"scope_{name}" if name in ("domain", "task_type") else name
            queryset = queryset.filter(**{column: filters[name]})
    return queryset


def record_history(record: MemoryRecord, *, sees_restricted: bool) -> QuerySet[MemoryRecord]:
    """Every live version of the record's fact that the reader may see, oldest first."""
    return (
        records_live()
        .visible(sees_restricted=sees_restricted)
        .filter(fact_id=record.fact_id)
        .order_by("version")
    )


def open_conflict_contender_ids(fact_ids: list[uuid.UUID]) -> set[uuid.UUID]:
    return set(
        Conflict.objects.filter(fact_id__in=fact_ids, state=ConflictState.OPEN).values_list(
            "contender_id", flat=True
        )
    )


@dataclass(frozen=True)
class ScopeFilter:
    """Which scopes a read covers, as search filters them: exact domain and task type,
    conditions by containment (a fact observed under ``{"region": "eu", "tier": 1}`` applies
    where ``{"region": "eu"}`` is asked)."""

    domain: str = ""
    task_type: str = ""
    conditions: dict[str, Any] | None = None

    def q(self) -> Q:
        where = Q()
        if self.domain:
            where &= Q(scope_domain=self.domain)
        if self.task_type:
            where &= Q(scope_task_type=self.task_type)
        if self.conditions:
            where &= Q(scope_conditions__contains=self.conditions)
        return where


def facts_current(
    subject: str,
    as_of: datetime | None = None,
    scope: ScopeFilter | None = None,
    trust: str = "",
    *,
    sees_restricted: bool,
) -> QuerySet[MemoryRecord]:
    """The current version of each scoped fact of ``subject``; never superseded or expired
    ones. One key may have a current value in each of several scopes.

    With ``as_of``: what the memory held at that moment (:meth:`MemoryRecordQuerySet.held_at`),
    including versions that have expired since. With ``trust``: only the facts whose current
    value has that trust.
    """
    where = (scope or ScopeFilter()).q()
    if trust:
        where &= Q(trust=trust)
    order = ("key", "scope_domain", "scope_task_type", "fact_id")
    visible = MemoryRecord.objects.visible(sees_restricted=sees_restricted)
    held = visible.live().current() if as_of is None else visible.held_at(as_of)
    return held.filter(where, subject=subject).order_by(*order)


@dataclass
class ScopedFacts:
    """One scope of a subject, with the current version of each of its facts there."""

    scope: Scope
    facts: list[MemoryRecord]


def subject_facts_by_scope(subject: str, *, sees_restricted: bool) -> list[ScopedFacts]:
    """The subject's current facts that the reader may see, grouped by scope (domain, task
    type, conditions), in a fixed number of queries."""
    current = facts_current(subject, sees_restricted=sees_restricted)
    fact_scopes = dict(
        Fact.objects.filter(pk__in={r.fact_id for r in current}).values_list("pk", "scope_id")
    )
    scopes = Scope.objects.in_bulk(set(fact_scopes.values()))
    grouped: dict[uuid.UUID, list[MemoryRecord]] = {}
    for record in current:
        grouped.setdefault(fact_scopes[record.fact_id], []).append(record)
    order = sorted(grouped, key=lambda pk: scopes[pk].canonical)
    return [ScopedFacts(scope=scopes[pk], facts=grouped[pk]) for pk in order]


def scopes_with_counts() -> QuerySet[Scope]:
    """The tenant's scopes, each with how many facts it holds and how many subjects."""
    return Scope.objects.annotate(
        fact_count=Count("facts"), subject_count=Count("facts__subject", distinct=True)
    ).order_by("domain", "task_type", "canonical")


def deletions_covering(subject: str, as_of: datetime) -> list[str]:
    """Ids of the deletion receipts of ``subject`` made after ``as_of`` that took versions
    written by then: what the memory held at ``as_of`` but no longer can show. An erasure of
    the subject is named by its own receipt."""

    digest = subject_digest(subject)
    receipts = DeletionReceipt.objects.filter(deleted_at__gt=as_of).filter(
        Q(subject_digest=digest, written_from__lte=as_of)
        | Q(kind="erasure", counts__selector="subject", content_digest=digest)
    )
    return [str(pk) for pk in receipts.order_by("deleted_at", "id").values_list("pk", flat=True)]


class StaleReason:
    SUPERSEDED = "superseded"
    EXPIRED = "expired"
    REDACTED = "redacted"
    DELETED = "deleted"
    # Live and never superseded, yet not its fact's current value: a contender awaiting
    # review, or a version other than the one the caller named.
    NOT_CURRENT = "not_current"


@dataclass(frozen=True)
class FactCheck:
    id: str
    version: int | None
    found: bool
    stale: bool
    reason: str | None
    head: MemoryRecord | None  # the fact's current version now, if any
    current: bool = False
    status: str | None = None
    deletion_receipt: str | None = None
    detail: str | None = None
    # Decision-time trust of the named version (apps.records.trust): its trust, who confirmed
    # it, its open conflict, and whether it is safe to act on at the trust asked for.
    trust: str | None = None
    sensitivity: str | None = None
    confirmation: Confirmation | None = None
    conflict: uuid.UUID | None = None
    unsafe_reasons: tuple[str, ...] = ()

    @property
    def safe_to_act(self) -> bool:
        return not self.unsafe_reasons

    @property
    def current_id(self) -> str | None:
        return str(self.head.pk) if self.head else None

    @property
    def current_version(self) -> int | None:
        return self.head.version if self.head else None

    @property
    def in_conflict(self) -> bool:
        return self.conflict is not None


NOT_FOUND_DETAIL = "No record with this id exists in this tenant."


def facts_check(
    items: list[tuple[uuid.UUID, int | None]],
    *,
    trust: str = Trust.CONFIRMED,
    sees_restricted: bool,
) -> list[FactCheck]:
    """For each (record id, version): is it still the current value of its fact, and if not,
    why (:class:`StaleReason`) and which version is current now; and whether it is safe to act
    on: current, in no open conflict, and at least ``trust`` (:class:`UnsafeReason`).

    A deleted version is told from one that never existed by the deletion receipts (ids
    only). RLS shows this tenant's rows alone, so another tenant's id reads as unknown, and so
    does a restricted one the reader may not see."""

    ids = [pk for pk, _ in items]
    now = timezone.now()
    visible = MemoryRecord.objects.visible(sees_restricted=sees_restricted)
    stored = {r.pk: r for r in visible.filter(pk__in=ids)}
    decision_trust_annotate(stored.values())
    live_ids = set(visible.live(now).filter(pk__in=ids).values_list("pk", flat=True))
    missing = [pk for pk in ids if pk not in stored]
    receipt_of: dict[uuid.UUID, DeletionReceipt] = {}
    if missing:
        matches = Q()
        for pk in missing:
            matches |= Q(record_ids__contains=[str(pk)])
        for deletion in DeletionReceipt.objects.filter(matches).order_by("deleted_at"):
            for pk in missing:
                if str(pk) in deletion.record_ids:
                    receipt_of.setdefault(pk, deletion)
    fact_ids = {r.fact_id for r in stored.values()} | {
        r.fact_id for r in receipt_of.values() if r.fact_id
    }
    heads = {r.fact_id: r for r in visible.live(now).current().filter(fact_id__in=fact_ids)}
    out: list[FactCheck] = []
    for pk, version in items:
        record = stored.get(pk)
        if record is None:
            # Deleted (a receipt names it) or never held by this tenant (nothing does).
            receipt = receipt_of.get(pk)
            reason = None
            if receipt is not None:
                reason = StaleReason.EXPIRED if receipt.kind == "expiry" else StaleReason.DELETED
            out.append(
                FactCheck(
                    id=str(pk),
                    version=version,
                    found=False,
                    stale=receipt is not None,
                    reason=reason,
                    head=heads.get(receipt.fact_id) if receipt and receipt.fact_id else None,
                    deletion_receipt=str(receipt.pk) if receipt else None,
                    detail=None if receipt else NOT_FOUND_DETAIL,
                    unsafe_reasons=(
                        UnsafeReason.STALE if receipt is not None else UnsafeReason.NOT_FOUND,
                    ),
                )
            )
            continue
        head = heads.get(record.fact_id)
        is_current = (
            head is not None
            and head.pk == record.pk
            and (version is None or version == record.version)
        )
        reason = None
        if record.status == RecordStatus.SUPERSEDED:
            reason = StaleReason.SUPERSEDED
        elif record.pk not in live_ids:
            reason = StaleReason.EXPIRED
        elif record.status == RecordStatus.REDACTED:
            reason = StaleReason.REDACTED
        elif not is_current:
            reason = StaleReason.NOT_CURRENT
        conflict = record.open_conflict_id
        provisional = trust == Trust.CONFIRMED and record.trust != Trust.CONFIRMED
        unsafe = [
            why
            for why, applies in (
                (UnsafeReason.STALE, reason is not None),
                (UnsafeReason.IN_CONFLICT, conflict is not None),
                (UnsafeReason.PROVISIONAL, provisional),
            )
            if applies
        ]
        out.append(
            FactCheck(
                id=str(pk),
                version=version,
                found=True,
                stale=reason is not None,
                reason=reason,
                head=head,
                current=is_current and reason is None,
                status=record.status if record.pk in live_ids else RecordStatus.EXPIRED,
                trust=record.trust,
                sensitivity=record.sensitivity,
                confirmation=record.confirmation,
                conflict=conflict,
                unsafe_reasons=tuple(unsafe),
            )
        )
    return out


def derived_artifacts(record: MemoryRecord) -> dict[str, list[Any]]:
    """Summaries and embeddings derived from the record, by kind (described by the apps
    that derive them: ``signals.derived_artifacts``)."""
    described: dict[str, list[Any]] = {}
    for kinds in signals.derived_artifacts.results(record=record):
        for kind, artifacts in kinds.items():
            described.setdefault(kind, []).extend(artifacts)
    return described


# --- console: the memory browser's keyset pages --------------------------------------------


def record_cursor(record: MemoryRecord) -> Cursor:
    """The position of ``record`` in the browser's newest-first ``(written_at, id)`` order."""
    return Cursor(record.written_at, record.pk)


@dataclass(frozen=True)
class RecordPage:
    records: list[MemoryRecord]
    newer_than: Cursor | None  # set when newer records exist (a link back)
    older_than: Cursor | None  # set when older records exist (a link on)


RECORD_PAGE_COLUMNS = (
    "id",
    "fact_id",
    "subject",
    "key",
    "version",
    "scope_domain",
    "scope_task_type",
    "scope_conditions",
    "sensitivity",
    "trust",
    "status",
    "redaction_state",
    "is_current",
    "written_at",
    "expires_at",
)
PREVIEW_CHARACTERS = 160


def records_page(
    filters: dict[str, str],
    *,
    sees_restricted: bool,
    before: Cursor | None = None,
    after: Cursor | None = None,
    size: int = 50,
) -> RecordPage:
    """One page of live records, newest first, by keyset on ``(written_at, id)``; or, for an
    expiry window (``expiring_within``), soonest expiry first by keyset on ``(expires_at,
    id)``, paged forward only: ``before`` then is where the previous page ended.

    Rows carry a short ``content_preview`` instead of the value and text, whose size is
    unbounded. The range condition on ``written_at`` alone lets the (tenant, written_at)
    index start at the cursor, so a deep page costs what the first one does.
    """

    queryset = (
        records_list(filters, sees_restricted=sees_restricted)
        .only(*RECORD_PAGE_COLUMNS)
        .annotate(content_preview=Substr("content", 1, PREVIEW_CHARACTERS))
    )
    if filters.get("expiring_within"):
        return _records_by_expiry(queryset, continue_after=before, size=size)
    if after is not None:
        rows: list[MemoryRecord] = list(
            queryset.filter(after.newer("written_at")).order_by("written_at", "id")[: size + 1]
        )
        has_newer = len(rows) > size
        records = rows[:size][::-1]
        return RecordPage(
            records=records,
            newer_than=record_cursor(records[0]) if has_newer and records else None,
            older_than=record_cursor(records[-1]) if records else None,
        )
    if before is not None:
        queryset = queryset.filter(before.older("written_at"))
    newest_first: list[MemoryRecord] = list(queryset.order_by("-written_at", "-id")[: size + 1])
    records = newest_first[:size]
    return RecordPage(
        records=records,
        newer_than=record_cursor(records[0]) if before is not None and records else None,
        older_than=record_cursor(records[-1]) if len(newest_first) > size else None,
    )


def record_active_holds(record: MemoryRecord) -> list[Any]:
    """The legal holds keeping ``record``'s fact (on its subject or on the fact itself)."""

    return list(
        LegalHold.objects.active()
        .covering(subject=record.subject, fact=record.fact_id)
        .order_by("placed_at")
    )


def record_open_reviews(record: MemoryRecord) -> tuple[list[Conflict], list[PromotionRequest]]:
    """The open conflicts ``record`` takes part in and its open promotion requests."""

    open_conflicts = list(
        Conflict.objects.filter(state=ConflictState.OPEN)
        .filter(Q(current_record_id=record.pk) | Q(contender_id=record.pk))
        .order_by("-opened_at")
    )
    open_requests = PromotionRequest.objects.filter(record_id=record.pk, state=PromotionState.OPEN)
    return open_conflicts, list(open_requests.order_by("-requested_at"))


def _records_by_expiry(
    queryset: QuerySet[MemoryRecord], *, continue_after: Cursor | None, size: int
) -> RecordPage:
    if continue_after is not None:
        queryset = queryset.filter(continue_after.newer("expires_at"))
    rows: list[MemoryRecord] = list(queryset.order_by("expires_at", "id")[: size + 1])
    records = rows[:size]
    last = records[-1] if records else None
    return RecordPage(
        records=records,
        newer_than=None,
        older_than=Cursor(last.expires_at, last.pk)
        if last is not None and last.expires_at is not None and len(rows) > size
        else None,
    )
