"""Scoped retrieval: filter by tenant, scope, trust, sensitivity and expiry, then rank.

Filtering and ranking happen in one SQL statement, so an out-of-scope, expired, superseded,
deleted or other tenant's record is never even a ranking candidate (row-level security adds
the tenant on top of the explicit predicate).

Ranking is hybrid: pgvector cosine distance on the tenant's embedding model and PostgreSQL
full-text rank (``ts_rank_cd``), fused with reciprocal rank fusion (RRF, k=60). RRF needs no
score calibration between a cosine distance and a text rank, which live on unrelated scales,
and a result that both lists agree on rises to the top.

The vector plan is chosen per query. Filters can make an approximate index drop results (an
HNSW scan returns only the filtered survivors of its first ``ef_search`` candidates), so:

* few candidates (<= ``EXACT_LIMIT``): an exact scan of the filtered candidates' vectors;
* many candidates: the model's HNSW index with pgvector 0.8 iterative scans
  (``hnsw.iterative_scan = strict_order``), which keeps scanning until it has found ``k``
  rows that pass the filters.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import connection
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from apps.audit.services import Actor, audit_record
from apps.derivations.embedders import EmbedderUnavailable, get_embedder
from apps.records.models import SENSITIVITY_ORDER, MemoryRecord
from apps.records.validation import KEY_RE, SCOPE_NAME_RE, SUBJECT_RE
from apps.tenancy.models import Tenant

RRF_K = 60
EXACT_LIMIT = 10_000
HNSW_INDEXED = {"hashing-256": 256, "st-all-MiniLM-L6-v2": 384}
SEARCH_FIELDS = frozenset(
    {"query", "vector", "scope", "purpose", "top_k", "subject", "keys", "sensitivity_max", "as_of"}
)
SCOPE_FIELDS = frozenset({"domain", "task_type", "conditions"})


class SearchRejected(Exception):
    def __init__(self, errors: dict[str, list[str]]) -> None:
        super().__init__("invalid search")
        self.errors = errors


@dataclass
class SearchQuery:
    query: str = ""
    vector: list[float] | None = None
    domain: str = ""
    task_type: str = ""
    conditions: dict[str, Any] | None = None
    purpose: str = "context"
    top_k: int = 10
    subject: str = ""
    keys: list[str] = field(default_factory=list)
    sensitivity_max: str = ""
    as_of: datetime | None = None


@dataclass
class Hit:
    record: MemoryRecord
    score: float
    vector_similarity: float | None
    text_rank: float | None
    vector_position: int | None
    text_position: int | None


@dataclass
class SearchResult:
    hits: list[Hit]
    plan: str
    model: str


def parse_search(body: Any, *, dimension: int) -> SearchQuery:
    """Validate a search body; raise :class:`SearchRejected` naming every bad field."""
    if not isinstance(body, dict):
        raise SearchRejected({"body": ["Must be a JSON object."]})
    errors: dict[str, list[str]] = {}

    def add(path: str, message: str) -> None:
        errors.setdefault(path, []).append(message)

    for extra in sorted(set(body) - SEARCH_FIELDS):
        add(extra, "Unknown field.")
    q = SearchQuery()
    query = body.get("query")
    if query is not None:
        if not isinstance(query, str) or len(query) > 2000:
            add("query", "A string of at most 2000 characters.")
        else:
            q.query = query.strip()
    vector = body.get("vector")
    if vector is not None:
        if not isinstance(vector, list) or not all(
            isinstance(x, int | float) and not isinstance(x, bool) for x in vector
        ):
            add("vector", "A list of numbers.")
        elif len(vector) != dimension:
            add("vector", f"Must have {dimension} dimensions (the tenant's embedding model).")
        elif not all(abs(float(x)) < 1e30 for x in vector) or not any(vector):
            add("vector", "Must be finite and not all zero.")
        else:
            q.vector = [float(x) for x in vector]
    if not q.query and q.vector is None and "query" not in errors and "vector" not in errors:
        add("query", "Give a query text, a vector, or both.")
    scope = body.get("scope")
    if scope is not None:
        if not isinstance(scope, dict):
            add("scope", "Must be an object.")
        else:
            for extra in sorted(set(scope) - SCOPE_FIELDS):
                add(f"scope.{extra}", "Unknown scope key; use domain, task_type, conditions.")
            for name in ("domain", "task_type"):
                value = scope.get(name)
                if value is None:
                    continue
                if not isinstance(value, str) or not SCOPE_NAME_RE.match(value):
                    add(f"scope.{name}", "Lowercase letters, digits, _, . and -.")
                else:
                    setattr(q, name, value)
            conditions = scope.get("conditions")
            if conditions is not None:
                if not isinstance(conditions, dict):
                    add("scope.conditions", "Must be an object.")
                else:
                    q.conditions = conditions
    purpose = body.get("purpose", "context")
    if purpose not in ("context", "decision"):
        add("purpose", "One of: context, decision.")
    else:
        q.purpose = purpose
    top_k = body.get("top_k", 10)
    if not isinstance(top_k, int) or isinstance(top_k, bool) or not 1 <= top_k <= 100:
        add("top_k", "An integer from 1 to 100.")
    else:
        q.top_k = top_k
    subject = body.get("subject")
    if subject is not None:
        if not isinstance(subject, str) or not SUBJECT_RE.match(subject):
            add("subject", "kind:identifier, e.g. user:8812.")
        else:
            q.subject = subject
    keys = body.get("keys")
    if keys is not None:
        if (
            not isinstance(keys, list)
            or not 0 < len(keys) <= 100
            or not all(isinstance(k, str) and KEY_RE.match(k) for k in keys)
        ):
            add("keys", "A list of 1 to 100 dotted key names.")
        else:
            q.keys = keys
    sensitivity_max = body.get("sensitivity_max")
    if sensitivity_max is not None:
        if sensitivity_max not in SENSITIVITY_ORDER:
            add("sensitivity_max", f"One of: {', '.join(SENSITIVITY_ORDER)}.")
        else:
            q.sensitivity_max = sensitivity_max
    as_of = body.get("as_of")
    if as_of is not None:
        parsed = None
        if isinstance(as_of, str):
            try:
                parsed = parse_datetime(as_of)
            except ValueError:
                parsed = None
        if parsed is None or parsed.tzinfo is None:
            add("as_of", "An RFC 3339 timestamp with a zone.")
        else:
            q.as_of = parsed
    if errors:
        raise SearchRejected(errors)
    return q


def _candidate_sql(q: SearchQuery, params: dict[str, Any]) -> str:
    """WHERE clause over ``r`` (records): everything decided before ranking."""
    clauses = ["r.tenant_id = %(tenant)s"]
    if q.as_of is None:
        clauses.append("r.is_current AND r.status IN ('active', 'redacted')")
    else:
        params["as_of"] = q.as_of
        clauses.append(
            "r.current_from <= %(as_of)s AND (r.current_until IS NULL OR "
            "r.current_until > %(as_of)s) AND (r.expires_at IS NULL OR r.expires_at > %(as_of)s)"
        )
    # The expiry predicate every selector applies (a legal hold keeps a record readable).
    # The same predicate as apps.records.retention.live_q: expired, or written under a revoked
    # consent, unless a legal hold keeps it.
    clauses.append(
        "(((r.expires_at IS NULL OR r.expires_at > %(now)s) AND r.status <> 'expired' "
        "AND NOT (r.consent_ref <> '' AND EXISTS (SELECT 1 FROM records_consentrevocation cr "
        "WHERE cr.consent_ref = r.consent_ref))) "
        "OR EXISTS (SELECT 1 FROM records_legalhold h WHERE h.lifted_at IS NULL "
        "AND (h.subject = r.subject OR h.fact_id = r.fact_id)))"
    )
    if q.domain:
        params["domain"] = q.domain
        clauses.append("r.scope_domain = %(domain)s")
    if q.task_type:
        params["task_type"] = q.task_type
        clauses.append("r.scope_task_type = %(task_type)s")
    if q.conditions:
        params["conditions"] = json.dumps(q.conditions)
        clauses.append("r.scope_conditions @> %(conditions)s::jsonb")
    if q.purpose == "decision":
        clauses.append("r.trust = 'confirmed'")
    if q.sensitivity_max:
        allowed = list(SENSITIVITY_ORDER[: SENSITIVITY_ORDER.index(q.sensitivity_max) + 1])
        params["sensitivities"] = allowed
        clauses.append("r.sensitivity = ANY(%(sensitivities)s)")
    if q.subject:
        params["subject"] = q.subject
        clauses.append("r.subject = %(subject)s")
    if q.keys:
        params["keys"] = q.keys
        clauses.append("r.key = ANY(%(keys)s)")
    return " AND ".join(clauses)


def _vector_literal(vector: list[float]) -> str:
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


def search_scoped(*, tenant: Tenant, q: SearchQuery, actor: Actor) -> SearchResult:
    """Run a scoped search for the current tenant (RLS) and return the fused top ``k``."""
    embedder = get_embedder(tenant.embedding_model)
    query_vector = q.vector
    if query_vector is None and q.query and embedder.computes:
        try:
            query_vector = [float(x) for x in embedder.embed([q.query])[0]]
        except EmbedderUnavailable:
            query_vector = None
        if query_vector is not None and not any(query_vector):
            query_vector = None
    params: dict[str, Any] = {
        "tenant": tenant.pk,
        "now": timezone.now(),
        "k": q.top_k,
        "depth": max(q.top_k * 4, 40),
        "model": embedder.name,
    }
    where = _candidate_sql(q, params)
    base = f"records_memoryrecord r WHERE {where}"
    plan = "text"
    parts: list[str] = []
    with connection.cursor() as cursor:
        if query_vector is not None:
            params["vec"] = _vector_literal(query_vector)
            dimension = HNSW_INDEXED.get(embedder.name)
            plan = "exact"
            if dimension is not None:
                cursor.execute(
                    f"SELECT count(*) FROM (SELECT 1 FROM {base} LIMIT {EXACT_LIMIT + 1}) c",
                    params,
                )
                row = cursor.fetchone()
                if row is not None and row[0] > EXACT_LIMIT:
                    plan = "hnsw"
            if plan == "hnsw":
                cursor.execute("SET LOCAL hnsw.iterative_scan = strict_order")
                cursor.execute("SET LOCAL hnsw.ef_search = 400")
                cursor.execute("SET LOCAL hnsw.max_scan_tuples = 200000")
                distance = f"(e.vector::vector({dimension})) <=> %(vec)s::vector({dimension})"
                parts.append(
                    f"""vec AS (
                        SELECT e.record_id AS id, {distance} AS distance,
                               row_number() OVER (ORDER BY {distance}) AS position
                          FROM (SELECT e.record_id, e.vector FROM derivations_embedding e
                                  JOIN records_memoryrecord r ON r.id = e.record_id
                                 WHERE e.model = %(model)s AND {where}
                                 ORDER BY {distance} LIMIT %(depth)s) e)"""
                )
            else:
                parts.append(
                    f"""candidates AS MATERIALIZED (SELECT r.id FROM {base}),
                    vec AS (
                        SELECT e.record_id AS id, e.vector <=> %(vec)s::vector AS distance,
                               row_number() OVER (ORDER BY e.vector <=> %(vec)s::vector)
                                 AS position
                          FROM derivations_embedding e JOIN candidates c ON c.id = e.record_id
                         WHERE e.model = %(model)s
                         ORDER BY distance LIMIT %(depth)s)"""
                )
        else:
            parts.append(
                "vec AS (SELECT NULL::uuid AS id, NULL::float8 AS distance, "
                "NULL::bigint AS position WHERE false)"
            )
        if q.query:
            params["query"] = q.query
            parts.append(
                f"""tsq AS (SELECT websearch_to_tsquery('english', %(query)s) AS q),
                txt AS (
                    SELECT r.id, ts_rank_cd(r.search, tsq.q) AS rank,
                           row_number() OVER (ORDER BY ts_rank_cd(r.search, tsq.q) DESC, r.id)
                             AS position
                      FROM tsq, {base} AND r.search @@ tsq.q
                     ORDER BY rank DESC LIMIT %(depth)s)"""
            )
            plan = "text" if plan == "text" else f"{plan}+text"
        else:
            parts.append(
                "txt AS (SELECT NULL::uuid AS id, NULL::float4 AS rank, "
                "NULL::bigint AS position WHERE false)"
            )
        sql = (
            "WITH "
            + ",\n".join(parts)
            + f"""
            SELECT coalesce(vec.id, txt.id) AS id, vec.distance, txt.rank,
                   vec.position, txt.position,
                   coalesce(1.0 / ({RRF_K} + vec.position), 0)
                   + coalesce(1.0 / ({RRF_K} + txt.position), 0) AS score
              FROM vec FULL OUTER JOIN txt ON vec.id = txt.id
             ORDER BY score DESC, vec.distance ASC NULLS LAST, id
             LIMIT %(k)s"""
        )
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    records = {r.pk: r for r in MemoryRecord.objects.filter(pk__in=[row[0] for row in rows])}
    hits = [
        Hit(
            record=records[row[0]],
            score=float(row[5]),
            vector_similarity=None if row[1] is None else 1.0 - float(row[1]),
            text_rank=None if row[2] is None else float(row[2]),
            vector_position=row[3],
            text_position=row[4],
        )
        for row in rows
        if row[0] in records
    ]
    if q.purpose == "decision":
        # What the agent relied on for a decision is part of the record.
        audit_record(
            tenant=tenant,
            actor=actor,
            action="search.decision",
            object_type="search",
            data={"returned": [str(h.record.pk) for h in hits], "plan": plan},
        )
    return SearchResult(hits=hits, plan=plan, model=embedder.name)
