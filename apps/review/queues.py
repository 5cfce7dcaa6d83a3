"""Review queues: the pending promotion requests and the open conflicts, as reviewers work them.

Keyset pages, oldest first by the ``(tenant, state, requested_at)`` / ``(tenant, state,
opened_at)`` indexes, each page's observations and history in one query per kind: the
queries do not grow with the page or the queue. Every read applies the expiry predicate
(:func:`records_live`); row-level security applies the tenant. The bulk decisions only loop
over the decision services, so each decision keeps its own rules, locks and audit event.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime, timedelta
from typing import Any, Generic, TypeVar

from django.db import transaction
from django.db.models import (
    Case,
    Count,
    Exists,
    F,
    IntegerField,
    Min,
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
    TextChoices,
    Value,
    When,
    Window,
)
from django.db.models.functions import Coalesce, RowNumber
from django.utils import timezone

from apps.core.actors import Actor
from apps.core.pagination import Cursor
from apps.core.validation import json_equal
from apps.records.models import (
    SENSITIVITY_ORDER,
    Conflict,
    ConflictState,
    MemoryRecord,
    Observation,
    PromotionRequest,
    PromotionState,
    Resolution,
)
from apps.records.selectors import records_live
from apps.records.services import RecordError
from apps.review.claims import CONFLICTS, PROMOTIONS, ClaimKind, held_by, held_by_others
from apps.review.services import conflict_resolve, promotion_approve, promotion_reject

QUEUE_PAGE_SIZE = 20
# A compact row per conflict (its versions and history fold under it): a page is a screen.
CONFLICT_PAGE_SIZE = 20
# A bulk approval runs every approval in one transaction (each some 15 statements, with the
# tenant's audit chain locked until commit); this many keeps one request to a few seconds.
# The rest stays queued for the next run.
BULK_APPROVE_LIMIT = 200
# Observations shown per record version on a queue page (the count says when there are more).
OBSERVATIONS_SHOWN = 6
# Versions of a fact shown beside a conflict in the queue; its own page shows up to
# HISTORY_SHOWN.
QUEUE_HISTORY_SHOWN = 5
HISTORY_SHOWN = 100
# Counting stops here: "more than 1000 pending" tells a reviewer as much as the exact figure,
# and counting each page view stays cheap (every candidate needs its expiry check).
COUNT_LIMIT = 1_000


# --- cursors and pages ----------------------------------------------------------------------


QueueItem = TypeVar("QueueItem", PromotionRequest, Conflict)


@dataclass(frozen=True)
class QueuePage(Generic[QueueItem]):
    items: list[QueueItem]
    earlier_than: Cursor | None  # set when older items exist (a link back)
    later_than: Cursor | None  # set when newer items exist (a link on)


def _keyset_page(
    queryset: QuerySet[QueueItem],
    moment_field: str,
    *,
    after: Cursor | None,
    before: Cursor | None,
    size: int,
) -> QueuePage[QueueItem]:
    """One page of ``queryset`` in ascending ``(moment_field, id)`` order, by keyset."""

    def position(item: QueueItem) -> Cursor:
        return Cursor(getattr(item, moment_field), item.pk)

    if before is not None:
        # Walk back from the cursor, then show the slice oldest first like every page.
        rows = list(
            queryset.filter(before.older(moment_field)).order_by(f"-{moment_field}", "-id")[
                : size + 1
            ]
        )
        has_earlier = len(rows) > size
        rows = rows[:size][::-1]
        has_later = True
    else:
        if after is not None:
            queryset = queryset.filter(after.newer(moment_field))
        rows = list(queryset.order_by(moment_field, "id")[: size + 1])
        has_later = len(rows) > size
        rows = rows[:size]
        has_earlier = after is not None
    if not rows:
        return QueuePage(items=[], earlier_than=None, later_than=None)
    return QueuePage(
        items=rows,
        earlier_than=position(rows[0]) if has_earlier else None,
        later_than=position(rows[-1]) if has_later else None,
    )


def _live(record_field: str, now: datetime) -> Exists:
    """The row's ``record_field`` names a live record. A correlated EXISTS keeps the queue's
    index order: each candidate is checked by key, not every live record listed first."""
    return Exists(records_live(now).filter(pk=OuterRef(record_field)))


def _observations_prefetch(path: str) -> Prefetch[Any]:
    ordered = Observation.objects.order_by("observed_at", "recorded_at", "id")
    return Prefetch(path, queryset=ordered[:OBSERVATIONS_SHOWN], to_attr="observations_shown")


def attach_observation_counts(records: Iterable[MemoryRecord]) -> None:
    """Set ``record.observation_count`` on each record, in one grouped query: a subquery per
    row made the conflict query's planning alone cost more than the whole page should."""
    records = list(records)
    counted = (
        Observation.objects.filter(record_id__in={record.pk for record in records})
        .order_by()
        .values_list("record_id")
        .annotate(total=Count("id"))
    )
    totals: dict[uuid.UUID, int] = dict(counted)
    for record in records:
        record.observation_count = totals.get(record.pk, 0)  # type: ignore[attr-defined]


# --- the promotion queue --------------------------------------------------------------------


class ClaimFilter(TextChoices):
    ANY = "", "Anyone's or no one's"
    AVAILABLE = "available", "Not held by someone else"
    MINE = "mine", "Held by me"
    OTHERS = "others", "Held by someone else"


@dataclass(frozen=True)
class ConflictQueueFilters:
    """What a reviewer narrowed a queue to. ``key`` is a prefix (``shipping.`` matches every
    shipping key) and ``key_exact`` one key (a group's link); the others are exact (for a
    conflict, the sensitivity is the current version's). ``claim`` is a :class:`ClaimFilter`,
    read for ``reviewer_id``."""

    key: str = ""
    key_exact: str = ""
    subject: str = ""
    domain: str = ""
    sensitivity: str = ""
    pending_at_least: timedelta | None = None
    claim: str = ""
    reviewer_id: str = ""

    @property
    def active(self) -> bool:
        return any(getattr(self, item.name) for item in fields(self) if item.name in _NARROWING)


@dataclass(frozen=True)
class PromotionQueueFilters(ConflictQueueFilters):
    """As for conflicts, and ``writer`` (the record writer's label) and ``source`` (its source
    kind). ``requested_until`` pins a selection to what the reviewer was shown (bulk
    approval), so later arrivals are not approved unseen."""

    writer: str = ""
    source: str = ""
    requested_until: datetime | None = None
    # Requests already on the reviewer's page (a refill of the list skips them).
    shown: tuple[uuid.UUID, ...] = ()


# Each filter the reviewer sets, and the lookup that applies it to each queue.
_REQUEST_LOOKUPS = {
    "key": "record__key__startswith",
    "key_exact": "record__key",
    "subject": "record__subject",
    "domain": "record__scope_domain",
    "sensitivity": "record__sensitivity",
    "writer": "record__writer_label",
    "source": "record__source_kind",
}
_CONFLICT_LOOKUPS = {
    "key": "fact__key__startswith",
    "key_exact": "fact__key",
    "subject": "fact__subject",
    "domain": "current_record__scope_domain",
    "sensitivity": "current_record__sensitivity",
}
_NARROWING = {*_REQUEST_LOOKUPS, "pending_at_least", "claim"}


def _narrowed(
    queryset: QuerySet[QueueItem],
    filters: ConflictQueueFilters,
    lookups: dict[str, str],
    moment_field: str,
    now: datetime,
    kind: ClaimKind = PROMOTIONS,
) -> QuerySet[QueueItem]:
    """``queryset`` narrowed by ``filters``: each set one by its lookup, the age, the claim."""
    chosen = {lookup: getattr(filters, name) for name, lookup in lookups.items()}
    queryset = queryset.filter(**{lookup: value for lookup, value in chosen.items() if value})
    if filters.pending_at_least is not None:
        queryset = queryset.filter(**{f"{moment_field}__lte": now - filters.pending_at_least})
    return _claimed(queryset, filters.claim, filters.reviewer_id, now, kind)


def _claimed(
    queryset: QuerySet[QueueItem],
    claim: str,
    reviewer_id: str,
    now: datetime,
    kind: ClaimKind,
) -> QuerySet[QueueItem]:
    """``queryset`` narrowed by a :class:`ClaimFilter` read for ``reviewer_id``."""
    if claim == ClaimFilter.MINE:
        return queryset.filter(held_by(reviewer_id, now, kind))
    if claim == ClaimFilter.AVAILABLE:
        return queryset.exclude(held_by_others(reviewer_id, now, kind))
    if claim == ClaimFilter.OTHERS:
        return queryset.filter(held_by_others(reviewer_id, now, kind))
    return queryset


def _open_requests(filters: PromotionQueueFilters, now: datetime) -> QuerySet[PromotionRequest]:
    queryset = PromotionRequest.objects.filter(_live("record_id", now), state=PromotionState.OPEN)
    queryset = _narrowed(queryset, filters, _REQUEST_LOOKUPS, "requested_at", now)
    if filters.requested_until is not None:
        queryset = queryset.filter(requested_at__lte=filters.requested_until)
    if filters.shown:
        queryset = queryset.exclude(pk__in=list(filters.shown))
    return queryset


def _with_record_details(queryset: QuerySet[PromotionRequest]) -> QuerySet[PromotionRequest]:
    # The claim comes in the same row (a LEFT JOIN on its unique request): who holds each
    # request costs the page no query of its own.
    return queryset.select_related("record", "claim").prefetch_related(
        _observations_prefetch("record__observations")
    )


def promotion_queue_page(
    *,
    filters: PromotionQueueFilters,
    after: Cursor | None = None,
    before: Cursor | None = None,
    size: int = QUEUE_PAGE_SIZE,
) -> QueuePage[PromotionRequest]:
    """Pending requests, oldest first, each with its record and first observations."""
    queryset = _with_record_details(_open_requests(filters, timezone.now()))
    page = _keyset_page(queryset, "requested_at", after=after, before=before, size=size)
    attach_observation_counts(item.record for item in page.items)
    return page


class QueueOrder(TextChoices):
    OLDEST = "", "Oldest request first"
    SENSITIVITY = "sensitivity", "Most sensitive first"
    EXPIRY = "expiry", "Provisional record expiring first"


def _sensitivity_rank(field: str) -> Case:
    """Most sensitive first (0): the items whose mistakes cost most."""
    ranked = enumerate(reversed(SENSITIVITY_ORDER))
    whens = [When(**{field: sensitivity}, then=Value(rank)) for rank, sensitivity in ranked]
    # Anything else ranks with the least sensitive.
    return Case(*whens, default=Value(len(whens) - 1), output_field=IntegerField())


def _ranked_page(
    queryset: QuerySet[QueueItem],
    rank: Case,
    moment_field: str,
    *,
    after: Cursor | None,
    size: int,
) -> QueuePage[QueueItem]:
    """One page in ``(rank, moment_field, id)`` order, forward from ``after`` (the cursor's
    row says which rank it was in)."""
    found = None
    if after is not None:
        found = (
            queryset.model.objects.filter(pk=after.id)
            .annotate(cursor_rank=rank)
            .values_list("cursor_rank", flat=True)
            .first()
        )
    queryset = queryset.annotate(rank=rank)
    if after is not None and found is not None:
        queryset = queryset.filter(Q(rank__gt=found) | (Q(rank=found) & after.newer(moment_field)))
    return _forward(queryset, ("rank", moment_field, "id"), moment_field, size)


def _forward(
    queryset: QuerySet[QueueItem], ordering: tuple[str, ...], moment_field: str, size: int
) -> QueuePage[QueueItem]:
    """One page in ``ordering``, forward only: the first page is the way back."""
    rows = list(queryset.order_by(*ordering)[: size + 1])
    last = rows[size - 1] if len(rows) > size else None
    later = Cursor(getattr(last, moment_field), last.pk) if last is not None else None
    return QueuePage(items=rows[:size], earlier_than=None, later_than=later)


# A request whose record has no expiry sorts after every expiring one.
_NEVER = datetime(9999, 1, 1, tzinfo=UTC)


def promotion_queue_sorted_page(
    *,
    filters: PromotionQueueFilters,
    order: str,
    after: Cursor | None = None,
    size: int = QUEUE_PAGE_SIZE,
) -> QueuePage[PromotionRequest]:
    """Pending requests in ``order`` (a :class:`QueueOrder` other than oldest first), paged
    forward by keyset: by the provisional record's expiry, or by sensitivity, then age."""
    queryset = _with_record_details(_open_requests(filters, timezone.now()))
    if order == QueueOrder.EXPIRY:
        queryset = queryset.annotate(expiry=Coalesce(F("record__expires_at"), Value(_NEVER)))
        if after is not None:
            queryset = queryset.filter(after.newer("expiry"))
        page = _forward(queryset, ("expiry", "id"), "expiry", size)
    else:
        rank = _sensitivity_rank("record__sensitivity")
        page = _ranked_page(queryset, rank, "requested_at", after=after, size=size)
    attach_observation_counts(item.record for item in page.items)
    return page


def promotion_queue_refill(
    *, filters: PromotionQueueFilters, order: str, after_id: uuid.UUID, size: int = 1
) -> list[PromotionRequest]:
    """The next ``size`` pending requests after request ``after_id`` in ``order`` (the last
    row of the reviewer's list), skipping ``filters.shown``: what a decision adds at the end
    of the list, so the list never runs dry and paging is not a step of its own."""
    last = PromotionRequest.objects.filter(pk=after_id).select_related("record").first()
    if last is None:
        return []
    expiry = last.record.expires_at or _NEVER
    cursor = Cursor(expiry if order == QueueOrder.EXPIRY else last.requested_at, last.pk)
    if order == QueueOrder.OLDEST:
        return promotion_queue_page(filters=filters, after=cursor, size=size).items
    return promotion_queue_sorted_page(filters=filters, order=order, after=cursor, size=size).items


def promotions_pending(now: datetime | None = None) -> QuerySet[PromotionRequest]:
    """The whole promotion queue, unfiltered: open requests of live versions (uncounted: the
    operators' metrics count it in one statement with other figures)."""
    return _open_requests(PromotionQueueFilters(), now or timezone.now())


def _count(queryset: QuerySet[Any], limit: int) -> int:
    """How many, counted up to ``limit`` (one more means "more")."""
    return queryset.order_by()[: limit + 1].count()


def promotion_queue_count(*, filters: PromotionQueueFilters, limit: int = COUNT_LIMIT) -> int:
    return _count(_open_requests(filters, timezone.now()), limit)


class QueueGroup(TextChoices):
    NONE = "", "No grouping"
    SUBJECT = "subject", "Subject"
    KEY = "key", "Key"
    WRITER = "writer", "Writer"
    SOURCE = "source", "Source kind"


def group_filter(by: str) -> str:
    """The filter that selects exactly one group (of either queue); its lookup groups them."""
    return "key_exact" if by == QueueGroup.KEY else by


# Groups listed at once, largest first: the rest are counted.
GROUPS_SHOWN = 50


@dataclass(frozen=True)
class RequestGroup:
    """Pending requests sharing one subject, key, writer or source kind (or open conflicts
    sharing one key, subject or domain)."""

    value: str
    count: int
    oldest: datetime


@dataclass(frozen=True)
class RequestGroups:
    by: str
    groups: list[RequestGroup]
    more: bool  # more groups than listed


def promotion_queue_groups(
    *, filters: PromotionQueueFilters, by: str, limit: int = GROUPS_SHOWN
) -> RequestGroups:
    """The pending requests matching ``filters`` grouped ``by`` a :class:`QueueGroup`: a
    reviewer decides a group together through the bulk confirmation."""
    queryset = _open_requests(filters, timezone.now())
    return _grouped(queryset, by, _REQUEST_LOOKUPS[group_filter(by)], "requested_at", limit)


def _grouped(
    queryset: QuerySet[QueueItem], by: str, column: str, moment_field: str, limit: int
) -> RequestGroups:
    """``queryset``'s items grouped by ``column``, largest group first (then oldest by
    ``moment_field``), in one aggregate query."""
    rows = list(
        queryset.order_by()
        .values_list(column)
        .annotate(total=Count("id"), oldest=Min(moment_field))
        .order_by("-total", "oldest", column)[: limit + 1]
    )
    groups = [
        RequestGroup(value=value, count=total, oldest=oldest) for value, total, oldest in rows
    ]
    return RequestGroups(by=by, groups=groups[:limit], more=len(groups) > limit)


# Where a page's "what arrived since" starts: after every request of its moment.
_LAST_ID = uuid.UUID(int=2**128 - 1)


def arrivals_mark(now: datetime | None = None) -> Cursor:
    """The position after every request made up to ``now``: what a page loaded now shows."""
    return Cursor(now or timezone.now(), _LAST_ID)


def promotion_queue_arrivals(
    *, filters: PromotionQueueFilters, since: Cursor, limit: int = COUNT_LIMIT
) -> int:
    """How many pending requests matching ``filters`` arrived after ``since``, for a queue
    page's "N new requests" notice."""
    return _count(
        _open_requests(filters, timezone.now()).filter(since.newer("requested_at")), limit
    )


def promotion_queue_selection(
    *,
    filters: PromotionQueueFilters,
    only: Collection[uuid.UUID] | None = None,
    limit: int = BULK_APPROVE_LIMIT,
) -> list[PromotionRequest]:
    """The oldest ``limit`` pending requests matching ``filters``: a bulk approval's batch.
    ``only`` pins it to the requests a reviewer was shown (one no longer pending or matching
    drops out), so a confirmation approves at most what it listed."""
    queryset = _open_requests(filters, timezone.now()).select_related("record", "claim")
    return _oldest(queryset, "requested_at", only, limit)


def _oldest(
    queryset: QuerySet[QueueItem], moment_field: str, only: Collection[uuid.UUID] | None, limit: int
) -> list[QueueItem]:
    if only is not None:
        queryset = queryset.filter(pk__in=list(only))
    return list(queryset.order_by(moment_field, "id")[:limit])


def promotion_request_get(request_id: uuid.UUID) -> PromotionRequest | None:
    """A request (in any state) whose record is live, with its record's observations."""
    queryset = PromotionRequest.objects.filter(pk=request_id).filter(
        _live("record_id", timezone.now())
    )
    found = _with_record_details(queryset).first()
    if found is not None:
        attach_observation_counts([found.record])
    return found


# --- the conflict queue ---------------------------------------------------------------------


def _conflicts_live(now: datetime) -> QuerySet[Conflict]:
    """Conflicts between live versions: one whose side has expired is moot."""
    return Conflict.objects.filter(_live("current_record_id", now)).filter(
        _live("contender_id", now)
    )


def _with_version_details(queryset: QuerySet[Conflict]) -> QuerySet[Conflict]:
    # The claim in the same row, as for promotion requests: who holds each costs no query.
    return queryset.select_related("current_record", "contender", "fact", "claim").prefetch_related(
        _observations_prefetch("current_record__observations"),
        _observations_prefetch("contender__observations"),
    )


def _attach_version_details(conflicts: Sequence[Conflict], *, per_fact: int) -> None:
    attach_observation_counts(
        record for conflict in conflicts for record in (conflict.current_record, conflict.contender)
    )
    attach_history(conflicts, per_fact=per_fact)
    for conflict in conflicts:
        conflict.differences = version_differences(  # type: ignore[attr-defined]
            conflict.current_record, conflict.contender
        )


# What a reviewer compares between two versions of a fact, by the name the version card
# gives each line: the differing ones are highlighted.
_COMPARED: dict[str, tuple[str, ...]] = {
    "value": ("value",),
    "source": ("source_kind", "source_ref", "source_turn_id", "source_tool_call_id"),
    "observed": ("observed_at",),
    "writer": ("writer_type", "writer_id"),
    "owner": ("owner",),
    "reason": ("reason",),
    "sensitivity": ("sensitivity", "retention_basis", "expires_at"),
}


def version_differences(current: MemoryRecord, contender: MemoryRecord) -> frozenset[str]:
    """The lines of the version cards on which two versions differ (values by JSON meaning,
    so ``1`` and ``1.0`` do not)."""
    differing = set()
    for line, names in _COMPARED.items():
        for name in names:
            mine, theirs = getattr(current, name), getattr(contender, name)
            if name == "expires_at" and mine is not None and theirs is not None:
                # Shown as a date: versions written moments apart expire "the same day".
                mine, theirs = mine.date(), theirs.date()
            same = json_equal(mine, theirs) if name == "value" else mine == theirs
            if not same:
                differing.add(line)
                break
    return frozenset(differing)


class ConflictOrder(TextChoices):
    OLDEST = "", "Oldest conflict first"
    SENSITIVITY = "sensitivity", "Most sensitive first"
    NEWEST = "newest", "Newest conflict first"


def _open_conflicts(filters: ConflictQueueFilters, now: datetime) -> QuerySet[Conflict]:
    queryset = _conflicts_live(now).filter(state=ConflictState.OPEN)
    return _narrowed(queryset, filters, _CONFLICT_LOOKUPS, "opened_at", now, CONFLICTS)


def conflict_queue_page(
    *,
    filters: ConflictQueueFilters | None = None,
    order: str = ConflictOrder.OLDEST,
    after: Cursor | None = None,
    before: Cursor | None = None,
    size: int = CONFLICT_PAGE_SIZE,
) -> QueuePage[Conflict]:
    """Open conflicts matching ``filters`` in ``order`` (oldest first pages both ways; the
    other orders page forward), each with both versions, their observations, the fact's
    latest versions (``conflict.history``) and the lines they differ on
    (``conflict.differences``)."""
    queryset = _with_version_details(
        _open_conflicts(filters or ConflictQueueFilters(), timezone.now())
    )
    if order == ConflictOrder.SENSITIVITY:
        page = _ranked_page(
            queryset,
            _sensitivity_rank("current_record__sensitivity"),
            "opened_at",
            after=after,
            size=size,
        )
    elif order == ConflictOrder.NEWEST:
        if after is not None:
            queryset = queryset.filter(after.older("opened_at"))
        page = _forward(queryset, ("-opened_at", "-id"), "opened_at", size)
    else:
        page = _keyset_page(queryset, "opened_at", after=after, before=before, size=size)
    _attach_version_details(page.items, per_fact=QUEUE_HISTORY_SHOWN)
    return page


def conflicts_open(now: datetime | None = None) -> QuerySet[Conflict]:
    """The whole conflict queue, unfiltered: open conflicts between live versions."""
    return _open_conflicts(ConflictQueueFilters(), now or timezone.now())


def conflict_queue_count(
    *, filters: ConflictQueueFilters | None = None, limit: int = COUNT_LIMIT
) -> int:
    return _count(_open_conflicts(filters or ConflictQueueFilters(), timezone.now()), limit)


class ConflictGroup(TextChoices):
    NONE = "", "No grouping"
    KEY = "key", "Key"
    SUBJECT = "subject", "Subject"
    DOMAIN = "domain", "Domain"


def conflict_queue_groups(
    *, filters: ConflictQueueFilters, by: str, limit: int = GROUPS_SHOWN
) -> RequestGroups:
    """The open conflicts matching ``filters`` grouped ``by`` a :class:`ConflictGroup`."""
    queryset = _open_conflicts(filters, timezone.now())
    return _grouped(queryset, by, _CONFLICT_LOOKUPS[group_filter(by)], "opened_at", limit)


def conflict_queue_selection(
    *,
    filters: ConflictQueueFilters,
    only: Collection[uuid.UUID] | None = None,
    limit: int = BULK_APPROVE_LIMIT,
) -> list[Conflict]:
    """A bulk resolution's batch, as :func:`promotion_queue_selection`."""
    queryset = _open_conflicts(filters, timezone.now()).select_related(
        "fact", "current_record", "contender", "claim"
    )
    return _oldest(queryset, "opened_at", only, limit)


def conflict_get(conflict_id: uuid.UUID) -> Conflict | None:
    """A conflict (open or resolved) between live versions, with the fact's history."""
    queryset = _with_version_details(_conflicts_live(timezone.now()).filter(pk=conflict_id))
    conflict = queryset.select_related("resolved_record").first()
    if conflict is not None:
        _attach_version_details([conflict], per_fact=HISTORY_SHOWN)
    return conflict


def attach_history(conflicts: Sequence[Conflict], *, per_fact: int) -> None:
    """Set ``conflict.history`` (newest version first, up to ``per_fact``) and
    ``conflict.history_more`` on each conflict, in one query for all of them."""
    fact_ids = {conflict.fact_id for conflict in conflicts}
    by_fact: dict[uuid.UUID, list[MemoryRecord]] = {fact_id: [] for fact_id in fact_ids}
    if fact_ids:
        ranked = (
            records_live()
            .filter(fact_id__in=fact_ids)
            .annotate(
                newest_rank=Window(
                    RowNumber(), partition_by=[F("fact_id")], order_by=F("version").desc()
                )
            )
            .filter(newest_rank__lte=per_fact + 1)
            .order_by("fact_id", "-version")
        )
        for version in ranked:
            by_fact[version.fact_id].append(version)
    for conflict in conflicts:
        versions = by_fact.get(conflict.fact_id, [])
        conflict.history = versions[:per_fact]  # type: ignore[attr-defined]
        conflict.history_more = len(versions) > per_fact  # type: ignore[attr-defined]


# --- bulk approval --------------------------------------------------------------------------


@dataclass
class BulkDecision:
    """What a bulk decision did: every item it decided, and each it could not, why."""

    decided: list[Any] = field(default_factory=list)
    refused: list[tuple[Any, str]] = field(default_factory=list)


def _decide_each(items: Iterable[QueueItem], decide: Callable[[QueueItem], object]) -> BulkDecision:
    """``decide`` each item in turn: a refusal (a :class:`RecordError`, inside the decision's
    own savepoint) is reported and skipped, and the others still commit."""
    outcome = BulkDecision()
    for item in items:
        try:
            decide(item)
        except RecordError as error:
            outcome.refused.append((item, str(error)))
        else:
            outcome.decided.append(item)
    return outcome


@transaction.atomic
def promotions_approve_bulk(
    *, requests: Iterable[PromotionRequest], actor: Actor, reason: str
) -> BulkDecision:
    """Approve each request with ``promotion_approve``, in one transaction; one the rules
    refuse (own record, decided meanwhile, superseded, held by another) is skipped."""
    return _decide_each(
        requests, lambda request: promotion_approve(request=request, actor=actor, reason=reason)
    )


@transaction.atomic
def promotions_reject_bulk(
    *, requests: Iterable[PromotionRequest], actor: Actor, reason: str
) -> BulkDecision:
    """Reject each request with ``promotion_reject``, in one transaction (as for approvals)."""
    return _decide_each(
        requests, lambda request: promotion_reject(request=request, actor=actor, reason=reason)
    )


@transaction.atomic
def conflicts_resolve_bulk(
    *, conflicts: Iterable[Conflict], actor: Actor, resolution: str, reason: str
) -> BulkDecision:
    """Resolve each conflict with ``conflict_resolve`` in one transaction, keeping the current
    or accepting the new value (a corrected value is one conflict's own); refusals skip."""
    if resolution not in (Resolution.KEEP_CURRENT, Resolution.ACCEPT_NEW):
        raise RecordError(
            "A bulk resolution keeps the current values or accepts the new ones; a corrected "
            "value is written conflict by conflict.",
            status=400,
            field="resolution",
        )
    return _decide_each(
        conflicts,
        lambda conflict: conflict_resolve(
            conflict=conflict, actor=actor, resolution=resolution, reason=reason
        ),
    )
