"""Replay a tenant's decisions: its audited decision searches of a period, on today's memory.

A ``search.decision`` audit event keeps the search's filters (scope, subject, keys,
sensitivity, ``as_of``, ``top_k``) and the ids it returned, never the question: its text may
quote memory content, and the audit log is a hash chain an erasure cannot rewrite. So a
replay re-runs what can be re-run without the question:

* the fate of each returned memory today, as :func:`decisions_at_risk_page` reads it (one
  reader of the audit log, keyset-paged, in the tenant's scope): ``superseded``,
  ``redacted``, ``deleted``, ``expired``, ``in_conflict``, ``unconfirmed``, or unchanged;
* ``new_memory``: records that became candidates of the search's own filters after it (the
  search's candidate predicate, :func:`apps.retrieval.search.candidate_predicate_sql`:
  current, live, in scope by the same containment rule, confirmed for a decision, within
  its sensitivity) by being written, becoming the current version or being confirmed since,
  other than a newer version of a fact the search returned (that one is ``superseded``).
  Without the question nobody can say whether such a memory would rank: it *may* now rank.

A decision "would now return something different" when a reason holds for it. A search
audited before its event kept the filters (``filters_unrecorded``) gets the fates of its
memories only; a search ``as_of`` a past moment gains no candidates (what the memory held
then cannot grow).
"""

from __future__ import annotations

import json
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import QuerySet
from django.utils import timezone
from django.utils.dateparse import parse_datetime, parse_duration

from apps.audit.models import AuditEvent
from apps.retrieval.search import candidate_predicate_sql, query_of_audited_filters
from apps.tenancy.context import current_tenant_id

from .selectors import CHANGE_KINDS, AtRiskFilters, decisions_at_risk_all

REASONS = ("new_memory", *CHANGE_KINDS)
DEFAULT_PERIOD = "P30D"
NOTE = (
    "The question of a decision search is not kept (its audit event holds the filters and the "
    "ids returned, never the query text), so a new memory is one that may now rank for it, "
    "not a certain change; the fate of a returned memory is certain."
)
# New candidates named per decision (all are counted).
NAMED_CANDIDATES = 10

# Records that became candidates of one set of filters after the oldest decision of a batch
# (``CANDIDATE``: the search's own predicate over ``r``), counted for each decision searched
# before they did, leaving out the versions of a fact the decision returned.
NEW_CANDIDATES_SQL = """
WITH fresh AS (
    SELECT r.id, r.fact_id,
           greatest(r.written_at, r.current_from, confirmed.at) AS became
      FROM records_memoryrecord r
      LEFT JOIN LATERAL (
          SELECT max(p.promoted_at) AS at FROM records_promotionevent p WHERE p.record_id = r.id
      ) confirmed ON TRUE
     WHERE CANDIDATE
       AND greatest(r.written_at, r.current_from, confirmed.at) > %(oldest)s
)
SELECT d.event, count(f.id),
       (array_agg(f.id::text ORDER BY f.became DESC, f.id))[1:%(named)s]
  FROM jsonb_to_recordset(%(decisions)s::jsonb) AS d(event uuid, at timestamptz, returned jsonb)
  JOIN fresh f ON f.became > d.at
 WHERE NOT EXISTS (
       SELECT 1 FROM records_memoryrecord was
        WHERE was.fact_id = f.fact_id
          AND was.id IN (SELECT x::uuid FROM jsonb_array_elements_text(d.returned) x))
 GROUP BY d.event
"""


class PeriodError(ValueError):
    """A ``--since``/``--until`` that names no moment, or a period that ends before it starts."""


def moment_parse(raw: str, *, now: datetime) -> datetime:
    """An RFC 3339 time with a zone, or an ISO 8601 duration (``P7D``, ``PT12H``) back from
    ``now``."""
    text = raw.strip()
    if text.upper().startswith("P"):
        duration = parse_duration(text.upper())
        if duration is None or duration.total_seconds() < 0:
            raise PeriodError(f"{raw!r} is not a duration (P7D, PT12H).")
        return now - duration
    try:
        moment = parse_datetime(text)
    except ValueError:
        moment = None
    if moment is None:
        raise PeriodError(f"{raw!r} is neither an RFC 3339 time nor a duration (P7D).")
    if timezone.is_naive(moment):
        raise PeriodError(f"{raw!r} has no zone (add Z or an offset).")
    return moment


def period_parse(
    since: str | None, until: str | None, *, now: datetime
) -> tuple[datetime, datetime]:
    start = moment_parse(since or DEFAULT_PERIOD, now=now)
    end = moment_parse(until, now=now) if until else now
    if start >= end:
        raise PeriodError(f"The period is empty: since {start.isoformat()} is not before until.")
    return start, end


@dataclass
class ReplayedDecision:
    """One audited decision search and what would differ about it today."""

    event_id: uuid.UUID
    searched_at: datetime
    actor: dict[str, str]
    returned: tuple[str, ...]
    # Returned memory id -> the kinds of change since the search.
    changed: dict[str, list[str]] = field(default_factory=dict)
    # None: the event kept no filters, so the new candidates could not be looked for.
    new_candidates: int | None = 0
    named_candidates: list[str] = field(default_factory=list)

    @property
    def reasons(self) -> list[str]:
        kinds = {kind for found in self.changed.values() for kind in found}
        if self.new_candidates:
            kinds.add("new_memory")
        return [reason for reason in REASONS if reason in kinds]

    def as_json(self) -> dict[str, Any]:
        return {
            "search_event": str(self.event_id),
            "searched_at": self.searched_at.isoformat(),
            "actor": self.actor,
            "reasons": self.reasons,
            "returned": len(self.returned),
            "changed": self.changed,
            "new_candidates": self.new_candidates,
            "new_candidate_ids": self.named_candidates,
        }


def _newest_first(events: QuerySet[AuditEvent], batch: int) -> Iterator[list[AuditEvent]]:
    """``events`` newest first, a batch at a time (keyset on the sequence, the index
    ``tenant, action, seq``)."""
    events = events.order_by("-seq")
    before: int | None = None
    while True:
        page = list((events.filter(seq__lt=before) if before is not None else events)[:batch])
        if page:
            yield page
        if len(page) < batch:
            return
        before = page[-1].seq


def _returned(event: AuditEvent) -> tuple[str, ...]:
    raw = event.data.get("returned") if isinstance(event.data, dict) else None
    found = []
    for item in raw if isinstance(raw, list) else []:
        try:
            found.append(str(uuid.UUID(str(item))))
        except ValueError:
            continue
    return tuple(found)


def _new_candidates(
    tenant: uuid.UUID, decisions: list[ReplayedDecision], filters: dict[str, Any]
) -> None:
    """Count, for each of ``decisions`` (one set of filters), the records that became
    candidates after it."""
    q = query_of_audited_filters(filters, purpose="decision")
    if q.as_of is not None:
        return  # what the memory held at a past moment gains nothing later
    params: dict[str, Any] = {
        "tenant": tenant,
        "now": timezone.now(),
        "oldest": min(d.searched_at for d in decisions),
        "named": NAMED_CANDIDATES,
        "decisions": json.dumps(
            [
                {"event": str(d.event_id), "at": d.searched_at.isoformat(), "returned": d.returned}
                for d in decisions
            ]
        ),
    }
    sql = NEW_CANDIDATES_SQL.replace("CANDIDATE", candidate_predicate_sql(q, params))
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    by_event = {d.event_id: d for d in decisions}
    for event, count, named in rows:
        decision = by_event[event]
        decision.new_candidates = int(count)
        decision.named_candidates = list(named or [])


def decisions_replay(
    *,
    since: datetime,
    until: datetime,
    batch: int = 500,
    progress: Callable[[int, int], None] | None = None,
) -> Iterator[ReplayedDecision]:
    """The current tenant's decision searches of ``[since, until)``, newest first, each with
    what would differ today."""
    tenant = current_tenant_id()
    if tenant is None:
        return
    searches = AuditEvent.objects.filter(
        tenant_id=tenant, action="search.decision", occurred_at__gte=since, occurred_at__lt=until
    )
    total = searches.count()
    # Every (decision, changed memory) of the period, in the decisions' order.
    changes = decisions_at_risk_all(AtRiskFilters(since=since, until=until), batch)
    pending = next(changes, None)
    done = 0
    for page in _newest_first(searches, batch):
        decisions = []
        groups: dict[str, list[ReplayedDecision]] = defaultdict(list)
        for event in page:
            decision = ReplayedDecision(
                event_id=event.pk,
                searched_at=event.occurred_at,
                actor={"type": event.actor_type, "id": event.actor_id, "label": event.actor_label},
                returned=_returned(event),
            )
            # Both readers go newest first over the same period: the changes of this event
            # come next (an event of no change has none).
            while pending is not None and pending.seq >= event.seq:
                if pending.seq == event.seq:
                    kinds = decision.changed.setdefault(str(pending.memory_id), [])
                    kinds.extend(c.kind for c in pending.changes if c.kind not in kinds)
                pending = next(changes, None)
            filters = event.data.get("filters") if isinstance(event.data, dict) else None
            if isinstance(filters, dict):
                groups[json.dumps(filters, sort_keys=True)].append(decision)
            else:
                decision.new_candidates = None
            decisions.append(decision)
        for key, members in groups.items():
            _new_candidates(tenant, members, json.loads(key))
        yield from decisions
        done += len(page)
        if progress is not None:
            progress(done, total)


@dataclass
class ReplaySummary:
    """The counts of a replay: per reason, the decisions it changes and the memories."""

    since: datetime
    until: datetime
    decisions: int = 0
    changed: int = 0
    filters_unrecorded: int = 0
    reasons: dict[str, dict[str, int]] = field(
        default_factory=lambda: {reason: {"decisions": 0, "memories": 0} for reason in REASONS}
    )
    changed_decisions: list[ReplayedDecision] = field(default_factory=list)

    @property
    def unchanged(self) -> int:
        return self.decisions - self.changed

    def add(self, decision: ReplayedDecision) -> None:
        self.decisions += 1
        if decision.new_candidates is None:
            self.filters_unrecorded += 1
        reasons = decision.reasons
        if not reasons:
            return
        self.changed += 1
        self.changed_decisions.append(decision)
        for reason in reasons:
            self.reasons[reason]["decisions"] += 1
        self.reasons["new_memory"]["memories"] += decision.new_candidates or 0
        for kinds in decision.changed.values():
            for kind in kinds:
                self.reasons[kind]["memories"] += 1

    def as_json(self, tenant: str) -> dict[str, Any]:
        return {
            "tenant": tenant,
            "since": self.since.isoformat(),
            "until": self.until.isoformat(),
            "note": NOTE,
            "decisions": self.decisions,
            "changed": self.changed,
            "unchanged": self.unchanged,
            "filters_unrecorded": self.filters_unrecorded,
            "reasons": self.reasons,
            "changed_decisions": [d.as_json() for d in self.changed_decisions],
        }


def replay_summary(
    *,
    since: datetime,
    until: datetime,
    batch: int = 500,
    progress: Callable[[int, int], None] | None = None,
) -> ReplaySummary:
    summary = ReplaySummary(since=since, until=until)
    for decision in decisions_replay(since=since, until=until, batch=batch, progress=progress):
        summary.add(decision)
    return summary


REASON_LABELS = {
    "new_memory": "new memory (may now rank)",
    "superseded": "superseded",
    "redacted": "redacted",
    "deleted": "deleted",
    "expired": "expired",
    "in_conflict": "in open conflict",
    "unconfirmed": "returned to provisional",
}


def replay_table(summary: ReplaySummary, tenant: str) -> str:
    lines = [
        f"Replay of {tenant}'s decision searches from "
        f"{summary.since.isoformat(timespec='seconds')} to "
        f"{summary.until.isoformat(timespec='seconds')} on today's memory",
        "",
        f"{'reason':<28}{'decisions':>10}{'memories':>10}",
    ]
    for reason in REASONS:
        counts = summary.reasons[reason]
        lines.append(
            f"{REASON_LABELS[reason]:<28}{counts['decisions']:>10}{counts['memories']:>10}"
        )
    lines += [
        "",
        f"decisions replayed: {summary.decisions}",
        f"would now return something different: {summary.changed}",
        f"unchanged: {summary.unchanged}",
    ]
    if summary.filters_unrecorded:
        lines.append(
            f"searched before their filters were audited (fates only, no new memory looked "
            f"for): {summary.filters_unrecorded}"
        )
    lines += ["", NOTE]
    return "\n".join(lines) + "\n"
