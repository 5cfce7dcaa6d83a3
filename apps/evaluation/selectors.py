"""Reads of the evaluation app: runs, and decisions at risk.

**Decisions at risk** replay the audit log. Every ``purpose=decision`` search is audited as
``search.decision`` with the ids of the memories it returned (``apps.retrieval.search``);
each of those memories is looked up now, and a decision is at risk when one of them has
changed since the search:

* ``superseded``: another version became current (``superseded_at``, ``superseded_by``);
* ``redacted``: a redaction rewrote it (its ``record.redact`` audit event);
* ``deleted``: a deletion or an erasure removed it (the receipt naming its id);
* ``expired``: its lifetime ended, its consent was revoked or its run closed (still stored:
  its expiry; compacted since: the ``expiry`` receipt);
* ``in_conflict``: a contradicting write opened a conflict against it, still open;
* ``unconfirmed``: a reviewer returned it to provisional.

One statement reads a page: decision events newest first (their index, ``tenant, action,
seq``), each returned id expanded with its position, and for each the changes after the
search's time found by indexed lookups (the record's primary key, the receipts' GIN index on
``record_ids``, the audit log's object index, the conflicts' foreign key). Paging is by
keyset on (event sequence, position), so a page costs the same at any depth; a page with few
decisions at risk among many searches reads those searches to fill itself.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import QuerySet
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from apps.core.pagination import Cursor
from apps.records.predicates import record_predicate_sql
from apps.tenancy.context import current_tenant_id

from .models import EvaluationRun

CHANGE_KINDS = ("superseded", "redacted", "deleted", "expired", "in_conflict", "unconfirmed")

# The changes of one returned memory (``d.memory``, a uuid) after its search (``d.at``).
CHANGES_SQL = """
    SELECT 'superseded' AS kind, r.superseded_at AS at,
           jsonb_build_object('superseded_by', r.superseded_by_id::text) AS detail
      FROM records_memoryrecord r
     WHERE r.id = d.memory AND r.superseded_at > d.at
    UNION ALL
    SELECT 'expired', least(r.expires_at, cr.revoked_at),
           jsonb_build_object('expires_at', least(r.expires_at, cr.revoked_at))
      FROM records_memoryrecord r
      LEFT JOIN records_consentrevocation cr
        ON r.consent_ref <> '' AND cr.consent_ref = r.consent_ref AND cr.tenant_id = r.tenant_id
     WHERE r.id = d.memory
       AND RECORD_EXPIRED
       AND coalesce(least(r.expires_at, cr.revoked_at), %(now)s) > d.at
       AND NOT RECORD_HELD
    UNION ALL
    SELECT CASE WHEN rc.kind = 'expiry' THEN 'expired' ELSE 'deleted' END, rc.deleted_at,
           jsonb_build_object('receipt', rc.id::text, 'receipt_kind', rc.kind)
      FROM audit_deletionreceipt rc
     WHERE rc.tenant_id = %(tenant)s AND rc.record_ids @> jsonb_build_array(d.memory::text)
       AND rc.deleted_at > d.at
    UNION ALL
    SELECT 'redacted', a.occurred_at, jsonb_build_object('audit_event', a.id::text)
      FROM audit_auditevent a
     WHERE a.tenant_id = %(tenant)s AND a.object_id = d.memory::text
       AND a.action = 'record.redact' AND a.occurred_at > d.at
    UNION ALL
    SELECT 'in_conflict', c.opened_at, jsonb_build_object('conflict', c.id::text)
      FROM records_conflict c
     WHERE c.current_record_id = d.memory AND c.state = 'open' AND c.opened_at > d.at
    UNION ALL
    SELECT 'unconfirmed', a.occurred_at, jsonb_build_object('audit_event', a.id::text)
      FROM audit_auditevent a
     WHERE a.tenant_id = %(tenant)s AND a.action = 'promotion.return_to_provisional'
       AND a.data->>'record' = d.memory::text AND a.occurred_at > d.at
"""

PAGE_SQL = """
SELECT d.event, d.seq, d.at, d.actor_type, d.actor_id, d.actor_label, d.memory, d.position,
       changed.changes,
       (SELECT jsonb_build_object('subject', r.subject, 'key', r.key)
          FROM records_memoryrecord r WHERE r.id = d.memory) AS still_stored
  FROM (
    SELECT e.id AS event, e.seq, e.occurred_at AS at, e.actor_type, e.actor_id, e.actor_label,
           returned.memory::uuid AS memory, returned.position
      FROM audit_auditevent e
     CROSS JOIN LATERAL jsonb_array_elements_text(
           CASE WHEN jsonb_typeof(e.data->'returned') = 'array' THEN e.data->'returned'
                ELSE '[]'::jsonb END) WITH ORDINALITY AS returned(memory, position)
     WHERE e.tenant_id = %(tenant)s AND e.action = 'search.decision'
       AND returned.memory ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
       FILTERS
  ) d
 CROSS JOIN LATERAL (
    SELECT jsonb_agg(jsonb_build_object('kind', c.kind, 'at', c.at, 'detail', c.detail)
                     ORDER BY c.at, c.kind) AS changes
      FROM (CHANGES) c
     WHERE c.kind = ANY(%(kinds)s)
 ) changed
 WHERE changed.changes IS NOT NULL
 ORDER BY d.seq DESC, d.position
 LIMIT %(limit)s
"""


@dataclass(frozen=True)
class AtRiskFilters:
    change: str = ""
    credential: str = ""
    memory: uuid.UUID | None = None
    since: datetime | None = None
    until: datetime | None = None


@dataclass(frozen=True)
class Change:
    kind: str
    at: datetime
    detail: dict[str, Any]


@dataclass(frozen=True)
class DecisionAtRisk:
    """One memory a past decision search returned, and what has changed about it since."""

    event_id: uuid.UUID
    seq: int
    searched_at: datetime
    actor_type: str
    actor_id: str
    actor_label: str
    memory_id: uuid.UUID
    position: int
    changes: tuple[Change, ...]
    subject: str = ""  # while the memory is still stored
    key: str = ""

    @property
    def cursor(self) -> Cursor:
        """The position of a page that ends with this item: its search, and its place among
        the memories that search returned."""
        return Cursor(self.searched_at, self.event_id, self.position)


def _changes(raw: Any) -> tuple[Change, ...]:
    items = json.loads(raw) if isinstance(raw, str) else raw
    found = []
    for item in items or []:
        at = parse_datetime(str(item["at"]))
        assert at is not None
        detail = {k: v for k, v in (item.get("detail") or {}).items() if v is not None}
        found.append(Change(kind=item["kind"], at=at, detail=detail))
    return tuple(found)


def decisions_at_risk_page(
    *, filters: AtRiskFilters, after: Cursor | None = None, limit: int = 50
) -> list[DecisionAtRisk]:
    """Up to ``limit`` decisions at risk of the current tenant, newest search first, after
    ``after`` (an item's :attr:`DecisionAtRisk.cursor`; one naming no search of the tenant
    finds nothing)."""
    tenant = current_tenant_id()
    if tenant is None:
        return []
    params: dict[str, Any] = {
        "tenant": tenant,
        "now": timezone.now(),
        "limit": limit,
        "kinds": [filters.change] if filters.change else list(CHANGE_KINDS),
    }
    clauses = []
    if after is not None:
        # The search's place in the log (its seq, found by its id) is the keyset.
        params["after_event"], params["after_position"] = after.id, after.position
        after_seq = (
            "(SELECT a.seq FROM audit_auditevent a"
            " WHERE a.id = %(after_event)s AND a.tenant_id = %(tenant)s)"
        )
        clauses.append(
            f"(e.seq < {after_seq} OR (e.seq = {after_seq}"
            " AND returned.position > %(after_position)s))"
        )
    for name, value, clause in (
        ("credential", filters.credential or None, "e.actor_id = %(credential)s"),
        ("memory", filters.memory and str(filters.memory), "returned.memory = %(memory)s"),
        ("since", filters.since, "e.occurred_at >= %(since)s"),
        ("until", filters.until, "e.occurred_at < %(until)s"),
    ):
        if value is not None:
            params[name] = value
            clauses.append(clause)
    changes = CHANGES_SQL.replace(
        "RECORD_EXPIRED", record_predicate_sql("expired", "r", params)
    ).replace("RECORD_HELD", record_predicate_sql("held", "r", params))
    sql = PAGE_SQL.replace("CHANGES", changes).replace(
        "FILTERS", "".join(f" AND {clause}" for clause in clauses)
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    items = []
    for event, seq, at, actor_type, actor_id, label, memory, position, changes, stored in rows:
        stored = json.loads(stored) if isinstance(stored, str) else (stored or {})
        columns = (event, seq, at, actor_type, actor_id, label, memory, position)
        subject, key = stored.get("subject", ""), stored.get("key", "")
        items.append(DecisionAtRisk(*columns, _changes(changes), subject, key))
    return items


def decisions_at_risk_all(filters: AtRiskFilters, batch: int) -> Iterator[DecisionAtRisk]:
    """Every decision at risk of the current tenant, a page of ``batch`` at a time."""
    after = None
    while True:
        page = decisions_at_risk_page(filters=filters, after=after, limit=batch)
        yield from page
        if len(page) < batch:
            return
        after = page[-1].cursor


def decisions_at_risk_count() -> int:
    """How many decisions at risk the current tenant has (reads every decision search: for a
    background run, not for a page)."""
    return sum(1 for _ in decisions_at_risk_all(AtRiskFilters(), 1000))


def evaluation_runs_recent(limit: int = 20) -> list[EvaluationRun]:
    """The current tenant's latest runs, newest first."""
    return list(EvaluationRun.objects.order_by("-requested_at", "-id")[:limit])


def evaluation_run_get(run_id: Any) -> EvaluationRun | None:
    """A run of the current tenant by id, or None (missing, malformed or another tenant's)."""
    try:
        pk = uuid.UUID(str(run_id))
    except (ValueError, TypeError):
        return None
    return EvaluationRun.objects.filter(pk=pk).first()


def evaluation_runs() -> QuerySet[EvaluationRun]:
    return EvaluationRun.objects.all()
