"""Scoped retrieval: filter by tenant, scope, trust, sensitivity and expiry, then rank.

Filtering and ranking happen in one SQL statement, so an out-of-scope, expired, superseded,
deleted or other tenant's record is never even a ranking candidate (row-level security adds
the tenant on top of the explicit predicate). Valid summaries are candidates beside records,
under the same sensitivity limit and only when every record they cite is live and in scope.

Ranking is hybrid: pgvector cosine distance on the tenant's embedding model and PostgreSQL
full-text rank (``ts_rank_cd``), fused with reciprocal rank fusion (RRF, k=60). RRF needs no
score calibration between a cosine distance and a text rank, which live on unrelated scales,
and a result that both lists agree on rises to the top.

The vector plan is chosen per query. Filters can make an approximate index drop results (an
HNSW scan returns only the filtered survivors of its first ``ef_search`` candidates), so:

* few candidates (<= ``SEARCH_EXACT_LIMIT``): an exact scan of the filtered candidates' vectors;
* many candidates: the model's HNSW index with pgvector 0.8 iterative scans
  (``hnsw.iterative_scan = strict_order``), which keeps scanning until it has found ``k``
  rows that pass the filters. A tenant holding many vectors has an HNSW index of its own
  (:mod:`apps.retrieval.tenant_indexes`, on the normalised vector); when the tenant has it,
  the statement orders by that index's expression and names the tenant and the model on the
  embedding row, so the planner can only pick it. A large domain inside such a tenant has
  one too (half precision); a search in that domain walks it instead, and ranks what it
  returns by the full-precision distance.

The first statement of a vector search is the exact plan, *gated*: it counts the candidates
(at most ``SEARCH_EXACT_LIMIT + 1``) and ranks only when they are few enough. So the
common, selective search takes one round trip; a search over many candidates learns from that
round trip that it needs the HNSW statement, and whether the tenant's own index (or the
domain's) is there to serve it. The process remembers that lesson for a minute (the
``search_plans`` cache: the filters, never the query or the results), so the same filters
again go straight to the HNSW statement; should it return fewer than ``top_k`` hits (the
candidates shrank meanwhile), the search forgets and runs gated, so a result never shrinks.
"""

from __future__ import annotations

import hashlib
import json
import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import partial
from typing import Any

from django.conf import settings
from django.core.cache import caches
from django.db import connection
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from apps.audit.services import audit_read, audit_record
from apps.core.actors import Actor
from apps.core.metrics import search_abstentions
from apps.derivations.embedders import (
    EmbedderUnavailable,
    decision_floor_curve,
    get_embedder,
    inclusion_margin,
)
from apps.derivations.models import Summary
from apps.derivations.vectors import (
    similarity_from_distance,
    unit_length,
)
from apps.records.models import SENSITIVITY_ORDER, MemoryRecord, Sensitivity
from apps.records.predicates import record_predicate_sql
from apps.records.trust import decision_trust_annotate, open_conflict_sql
from apps.tenancy.models import Tenant
from apps.tenancy.replicas import reading

from .tenant_indexes import HNSW_INDEXED, domain_index_name, index_name

# Reciprocal rank fusion's constant: a hit's score is the sum over the legs of
# 1 / (RRF_K + its rank in that leg). A small constant lets a leg's top ranks decide more;
# on the retrieval benchmark's development split recall@10 was flat from 3 to 10 and fell
# beyond (docs/retrieval.md).
RRF_K = 10
# BM25's usual constants (term-frequency saturation, length normalisation).
BM25_K1 = 1.2
BM25_B = 0.75
# The share of a query's weight a row must match to be a hit by its words alone, and the
# least population those weights are counted in (_text_leg).
TEXT_COVERAGE = 0.5
COVERAGE_POPULATION = 1000
# The share of the query's weight a candidate near enough by meaning must match for the two
# legs to agree that the search has an answer.
AGREE_COVERAGE = 0.25
# Under the floor, a hit by meaning must be at most this much further than the nearest.
INCLUSION_SPREAD = 0.03


def exact_limit() -> int:
    """The most filtered candidates the exact plan ranks (``settings.SEARCH_EXACT_LIMIT``):
    past it, the HNSW plan."""
    return int(settings.SEARCH_EXACT_LIMIT)


# Every stored column of a record but the generated full-text vector (deferred).
RECORD_FIELDS = [
    f for f in MemoryRecord._meta.concrete_fields if not getattr(f, "generated", False)
]
# The gated statement's candidate count, then whether the tenant's own index and the domain's
# index (apps.retrieval.tenant_indexes) are valid.
COUNT_COLUMN = 7
# id, kind, distance, rank, vec_position, txt_position, score, count, own index, domain index
RANKING_COLUMNS = 10
# After the record's columns: whether the record is a side of an open conflict.
CONFLICT_COLUMN = RANKING_COLUMNS + len(RECORD_FIELDS)
# Candidate-list size of the HNSW scan: the smallest that keeps recall@10 above the benchmark's
# target when a tenant holds a fifth of the index (benchmarks/retrieval_search.py; the figures
# are in docs/performance.md).
HNSW_EF_SEARCH = 800
HNSW_MAX_SCAN_TUPLES = 200_000
# A search with no filter of the caller's own, on a tenant's own index (apps.retrieval
# .tenant_indexes), keeps nearly everything the scan visits (only expired, superseded and
# deleted rows fail), so a shorter candidate list finds nearly the same neighbours, sooner.
# Half the general one keeps recall@10 above the benchmark's floor with a margin, where a
# quarter came too close to it (docs/performance.md).
HNSW_EF_SEARCH_OWN_UNFILTERED = 400


@dataclass
class SearchQuery:
    """A validated search (``apps.retrieval.serializers.SearchInput``)."""

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
    # None: the embedding model's own floor (apps.derivations.embedders).
    min_similarity: float | None = None
    # "contained": a memory applies when its scope is contained in the search's (general to
    # specific); "exact": the filter as it was before (named parts equal, the memory's
    # conditions including the search's).
    scope_match: str = "contained"


def search_visible(q: SearchQuery, *, sees_restricted: bool) -> SearchQuery:
    """``q`` as a reader who may not see restricted memories can ask it: its sensitivity
    ceiling at most ``personal``, so restricted records and summaries are never candidates
    (filtered before ranking, like any other filter)."""
    if sees_restricted or q.sensitivity_max in SENSITIVITY_ORDER[:-1]:
        return q
    return replace(q, sensitivity_max=SENSITIVITY_ORDER[-2])


@dataclass
class Hit:
    """A ranked record or (valid) summary: exactly one of the two is set."""

    record: MemoryRecord | None
    summary: Summary | None
    score: float
    vector_similarity: float | None
    text_rank: float | None
    vector_position: int | None
    text_position: int | None

    @property
    def item(self) -> MemoryRecord | Summary:
        item = self.record if self.record is not None else self.summary
        assert item is not None
        return item

    @property
    def pk(self) -> uuid.UUID:
        return self.item.pk


@dataclass(frozen=True)
class Abstention:
    """Why a search returned nothing: the answer an agent can act on instead of ``[]``.

    ``reason`` is one of ``nothing_in_scope`` (no memory passes the filters: scope, subject,
    keys, sensitivity, expiry), ``only_provisional`` (a decision search, and only provisional
    memories would have matched), ``below_floor`` (candidates exist, none matched the query's
    words and the nearest by meaning is under the relevance floor: ``best_similarity`` says
    how near, ``floor`` the floor the search was held to, a decision search's for its
    ``candidates``), ``nothing_matched`` (candidates exist and none matched, with no vector to
    compare)."""

    reason: str
    detail: str
    candidates: int
    best_similarity: float | None = None
    floor: float | None = None


@dataclass
class SearchResult:
    hits: list[Hit]
    plan: str
    model: str
    abstention: Abstention | None = None


def _held_at_sql(moment: datetime, params: dict[str, Any]) -> str:
    """``r`` was held by the memory at ``moment``: the records app's one definition
    (``MemoryRecordQuerySet.held_at``, as the facts read uses it), compiled by Django and
    bound with this statement's named parameters. Not today's expiry: what has expired
    since ``moment`` was still held then."""

    queryset = MemoryRecord.objects.held_at(moment).values("id")
    sql, values = queryset.query.sql_with_params()
    pieces = sql.split("%s")
    if len(pieces) != len(values) + 1:
        raise ValueError("The held_at predicate compiled to an unexpected placeholder count.")
    named = pieces[0]
    for index, (value, piece) in enumerate(zip(values, pieces[1:], strict=True)):
        params[f"held_at_{index}"] = value
        named += f"%(held_at_{index})s{piece}"
    return f"r.id IN ({named})"


def _scoped(q: SearchQuery) -> bool:
    """The search names a scope (a search naming none searches every scope)."""
    return bool(q.domain or q.task_type or q.conditions)


def _scope_clauses(q: SearchQuery, params: dict[str, Any], alias: str) -> list[str]:
    """The caller's own filters (scope, subject, keys) over a record alias.

    A memory applies to a scoped search when its scope is contained in the search's: the same
    domain, its task type empty or the search's, its conditions a subset of the search's (a
    general support preference governs a support email task, with or without conditions; a
    memory observed under conditions the search does not state does not apply). With
    ``scope_match: exact``, the parts the search names are matched as they are: the same
    domain, the same task type, the memory's conditions including the search's."""
    r = alias
    clauses = []
    if q.domain:
        params["domain"] = q.domain
        clauses.append(f"{r}.scope_domain = %(domain)s")
    if q.scope_match == "exact":
        if q.task_type:
            params["task_type"] = q.task_type
            clauses.append(f"{r}.scope_task_type = %(task_type)s")
        if q.conditions:
            params["conditions"] = json.dumps(q.conditions)
            clauses.append(f"{r}.scope_conditions @> %(conditions)s::jsonb")
    elif _scoped(q):
        params["task_type"] = q.task_type
        clauses.append(f"{r}.scope_task_type IN ('', %(task_type)s)")
        params["conditions"] = json.dumps(q.conditions or {})
        clauses.append(f"{r}.scope_conditions <@ %(conditions)s::jsonb")
    if q.subject:
        params["subject"] = q.subject
        clauses.append(f"{r}.subject = %(subject)s")
    if q.keys:
        params["keys"] = q.keys
        clauses.append(f"{r}.key = ANY(%(keys)s)")
    return clauses


def _embedding_scope_sql(q: SearchQuery) -> str:
    """The scope filters again, on the copy every record's embedding carries (migration
    ``derivations.0004``), as extra conjuncts. They select nothing the record filters do not:
    they let the exact plan read only the scope's vectors (one index range, hash-joined to
    the candidates, instead of one lookup per candidate) and the HNSW plan drop an
    out-of-scope vector before it visits its record. Their parameters are the record
    filters' (``_scope_clauses``)."""
    clauses = ""
    if q.domain:
        clauses += " AND e.scope_domain = %(domain)s"
    if q.scope_match == "exact":
        if q.task_type:
            clauses += " AND e.scope_task_type = %(task_type)s"
    elif _scoped(q):
        clauses += " AND e.scope_task_type IN ('', %(task_type)s)"
    return clauses


def _sensitivity_clause(q: SearchQuery, params: dict[str, Any], alias: str) -> list[str]:
    if not q.sensitivity_max:
        return []
    allowed = list(SENSITIVITY_ORDER[: SENSITIVITY_ORDER.index(q.sensitivity_max) + 1])
    params["sensitivities"] = allowed
    return [f"{alias}.sensitivity = ANY(%(sensitivities)s)"]


def candidate_predicate_sql(q: SearchQuery, params: dict[str, Any]) -> str:
    """The condition on ``r`` (records) a record meets to be a ranking candidate of ``q``:
    everything decided before ranking; needs ``%(tenant)s`` and ``%(now)s`` in ``params``."""
    clauses = ["r.tenant_id = %(tenant)s"]
    if q.as_of is None:
        clauses.append(record_predicate_sql("current", "r", params))
        # What every selector applies (MemoryRecord.objects.live): not expired, nor written
        # under a revoked consent, unless a legal hold keeps it.
        clauses.append(record_predicate_sql("live", "r", params))
    else:
        clauses.append(_held_at_sql(q.as_of, params))
    clauses.extend(_scope_clauses(q, params, "r"))
    if q.purpose == "decision":
        clauses.append("r.trust = 'confirmed'")
    clauses.extend(_sensitivity_clause(q, params, "r"))
    return " AND ".join(clauses)


def _summary_candidate_sql(q: SearchQuery, params: dict[str, Any]) -> str | None:
    """WHERE clause over ``s`` (summaries), or None when no summary can qualify.

    A summary is a candidate while it is valid, within ``sensitivity_max`` (its sensitivity
    is already the highest of its sources'), and every record it cites is still live. It has
    no scope of its own: under a scope, subject or keys filter it qualifies only when it
    cites at least one record and every record it cites matches the filter, so a summary
    never carries out-of-scope content into a scoped search. A summary is never
    ``confirmed``, so a decision search leaves summaries out.
    """
    if q.purpose == "decision":
        return None
    clauses = ["s.tenant_id = %(tenant)s", "s.valid"]
    if q.as_of is not None:
        params["as_of"] = q.as_of
        clauses.append("s.created_at <= %(as_of)s")
    clauses.extend(_sensitivity_clause(q, params, "s"))
    cited = (
        "FROM derivations_summarysource ss JOIN records_memoryrecord sr ON sr.id = ss.source_id "
        "WHERE ss.summary_id = s.id AND ss.source_type = 'record'"
    )
    scope = _scope_clauses(q, params, "sr")
    source_ok = [record_predicate_sql("live", "sr", params), *scope]
    clauses.append(f"NOT EXISTS (SELECT 1 {cited} AND NOT ({' AND '.join(source_ok)}))")
    if scope:
        clauses.append(f"EXISTS (SELECT 1 {cited})")
    return " AND ".join(clauses)


def _unfiltered(q: SearchQuery) -> bool:
    """No filter of the caller's own: only the tenant and what every search excludes."""
    return not (
        q.domain
        or q.task_type
        or q.conditions
        or q.subject
        or q.keys
        or q.sensitivity_max
        or q.as_of is not None
        or q.purpose == "decision"
    )


def _only_domain(q: SearchQuery) -> bool:
    """A domain and no other filter of the caller's own: within a domain index, unfiltered.
    (A contained search in a domain also leaves out the domain's more specific memories.)"""
    return bool(q.domain) and q.scope_match == "exact" and _unfiltered(replace(q, domain=""))


def _ef_search(q: SearchQuery, *, own: bool, scoped: bool) -> int:
    """The HNSW candidate list for ``q``: shorter where nothing is left to filter inside the
    index that serves it (the tenant's own, unfiltered; the domain's, domain only)."""
    if (own and _unfiltered(q)) or (scoped and _only_domain(q)):
        return HNSW_EF_SEARCH_OWN_UNFILTERED
    return HNSW_EF_SEARCH


# The HNSW scan settings, transaction-local (like SET LOCAL; they only affect HNSW scans).
HNSW_SETTINGS_SQL = (
    "SELECT set_config('hnsw.iterative_scan', 'strict_order', true), "
    "set_config('hnsw.ef_search', %(ef_search)s, true), "
    f"set_config('hnsw.max_scan_tuples', '{HNSW_MAX_SCAN_TUPLES}', true)"
)


def _plan_key(tenant_id: Any, model: str, q: SearchQuery) -> str:
    """What decides the candidate set of a vector search (not the vector, not the text)."""
    decisive = [
        str(tenant_id),
        model,
        q.domain,
        q.task_type,
        json.dumps(q.conditions, sort_keys=True),
        q.subject,
        q.keys,
        q.sensitivity_max,
        q.purpose,
        q.scope_match,
    ]
    return "large:" + hashlib.blake2b(json.dumps(decisive).encode(), digest_size=16).hexdigest()


def _vector_literal(vector: list[float]) -> str:
    return "[" + ",".join(map(repr, map(float, vector))) + "]"


@dataclass
class SearchStatement:
    """One SQL statement of a search, with its parameters."""

    plan: str
    sql: str
    params: dict[str, Any]
    # Gated: the exact plan, run only when the filtered candidates number at most
    # ``SEARCH_EXACT_LIMIT``; the statement also reports the count and makes the HNSW settings.
    gated: bool = False


def relevance_floor(q: SearchQuery, model: str, candidates: int | None = None) -> float:
    """The least cosine similarity the nearest candidate must have for a search to answer by
    meaning: the request's ``min_similarity``, or the embedding model's own floor; for a
    decision search over ``candidates`` (its filters' count), the model's decision floor for
    that many (:func:`_counted_floor`)."""
    floor = relevance_floors(q, model)[0]
    curve = _decision_curve(q, model)
    if curve is None or candidates is None:
        return floor
    return _counted_floor(floor, curve, candidates)


def relevance_floors(q: SearchQuery, model: str) -> tuple[float, float]:
    """The floor (:func:`relevance_floor`, before a decision search's count lowers it) and the
    inclusion floor: once a search answers, the least similarity a hit found by meaning must
    have. The model's margin sets it under the floor
    (``apps.derivations.embedders.INCLUSION_MARGINS``), for a context search and a decision
    search alike; a request's ``min_similarity`` is both."""
    if q.min_similarity is not None:
        return q.min_similarity, q.min_similarity
    embedder = get_embedder(model)
    return embedder.relevance_floor, embedder.relevance_floor - inclusion_margin(embedder.name)


def _decision_curve(q: SearchQuery, model: str) -> tuple[float, float] | None:
    """The model's decision floor curve, when it decides ``q``'s floor: a decision search
    without a ``min_similarity`` of its own, on a model that has one."""
    if q.purpose != "decision" or q.min_similarity is not None:
        return None
    return decision_floor_curve(model)


def _counted_floor(floor: float, curve: tuple[float, float], candidates: int) -> float:
    """A decision search's floor over ``candidates``: the curve's ``base + step *
    log2(candidates)``, never above the model's ``floor``. A decision search is narrowed by
    its filters (scope, subject, keys, confirmed trust) to a few memories; among few, an
    unrelated question is less likely to find one near by chance, so less similarity is
    evidence enough (apps.derivations.embedders.DECISION_FLOOR_CURVES)."""
    base, step = curve
    return min(floor, base + step * math.log2(max(candidates, 1)))


def _answer_distance_sql(
    q: SearchQuery, model: str, params: dict[str, Any], counted: str | None
) -> str:
    """The greatest distance the nearest candidate may have for the search to answer by
    meaning: ``max_distance``, or for a decision search the distance of its counted floor
    (:func:`_counted_floor`, the same formula) over ``counted``, the SQL of its candidate
    count. The HNSW plan runs only past ``SEARCH_EXACT_LIMIT`` candidates, where the curve has long
    reached the model's floor: it passes no count."""
    curve = _decision_curve(q, model)
    if curve is None or counted is None:
        return "%(max_distance)s"
    params["floor_base"], params["floor_step"] = curve
    return (
        "1.0 - least(1.0 - %(max_distance)s, %(floor_base)s + %(floor_step)s "
        f"* ln(greatest({counted}, 1)::float8) / ln(2))"
    )


def query_vector_for(q: SearchQuery, model: str) -> list[float] | None:
    """The vector to rank by: the caller's, or the query text embedded by the tenant's model."""
    if q.vector is not None:
        return unit_length(q.vector)
    embedder = get_embedder(model)
    if not q.query or not embedder.computes:
        return None
    try:
        vector = [float(x) for x in embedder.embed_queries([q.query])[0]]
    except EmbedderUnavailable:
        return None
    return vector if any(vector) else None


def _text_leg(base: str, gate: str, *, summaries: bool, counted: bool) -> list[str]:
    """The lexical leg's CTEs, ending in ``txt_ranked (id, kind, rank, coverage)``.

    The query's terms (``search_terms``, migration records 0010: stems matched as prefixes,
    stop words dropped) match any word of a candidate's ``search`` document (the GIN index
    finds them); each match is ranked by Okapi BM25 over the candidates (k1 1.2, b 0.75):
    a term's weight is its inverse document frequency among the candidates in the filters,
    so a word every memory of the scope holds counts little and a rare one much.
    ``coverage`` is the share of the query's weight a row matched: a row found by its words
    alone must match at least :data:`TEXT_COVERAGE` of it, so a stray common word does not
    make a hit. Those weights are inverse document frequencies too, but counted as if the
    candidates were at least :data:`COVERAGE_POPULATION` (a term no candidate holds weighs as
    one a single candidate holds): in a handful of memories every word is "common", and the
    share would say nothing.
    """
    if counted:
        population = "(SELECT n FROM counted)"
    else:
        population = f"(SELECT count(*) FROM (SELECT 1 FROM {base} LIMIT {exact_limit() + 1}) c)"
    matched = [
        f"SELECT r.id, 'record' AS kind, r.search FROM tsq, {base} AND r.search @@ tsq.q{gate}"
    ]
    if summaries:
        matched.append(
            "SELECT s.id, 'summary' AS kind, search_document('', s.text) FROM tsq, summaries s "
            f"WHERE search_document('', s.text) @@ tsq.q{gate}"
        )
    return [
        "terms AS MATERIALIZED (SELECT term FROM unnest(search_terms(%(query)s)) term)",
        # 'stem*' is a prefix, 'word' a whole word (search_terms).
        """tsq AS MATERIALIZED (
            SELECT string_agg(CASE WHEN right(term, 1) = '*'
                                   THEN quote_literal(left(term, -1)) || ':*'
                                   ELSE quote_literal(term) END, ' | ')::tsquery AS q
              FROM terms)""",
        f"txt_matched AS MATERIALIZED ({' UNION ALL '.join(matched)})",
        f"""txt_stats AS (
            SELECT greatest({population}, count(*)) AS n,
                   greatest(avg(length(search)), 1) AS avgdl
              FROM txt_matched)""",
        """txt_tf AS (
            SELECT m.id, m.kind, t.term, sum(array_length(u.positions, 1)) AS tf,
                   length(m.search) AS dl
              FROM txt_matched m CROSS JOIN LATERAL unnest(m.search) u
              JOIN terms t ON CASE WHEN right(t.term, 1) = '*'
                                   THEN starts_with(u.lexeme, left(t.term, -1))
                                   ELSE u.lexeme = t.term END
             GROUP BY m.id, m.kind, t.term, length(m.search))""",
        f"""txt_idf AS (
            SELECT t.term, ln(1 + (s.n - coalesce(d.df, 0) + 0.5) / (coalesce(d.df, 0) + 0.5))
                   AS idf,
                   ln(1 + (greatest(s.n, {COVERAGE_POPULATION}) - greatest(d.df, 1) + 0.5)
                          / (greatest(d.df, 1) + 0.5)) AS weight
              FROM terms t CROSS JOIN txt_stats s
              LEFT JOIN (SELECT term, count(*) AS df FROM txt_tf GROUP BY term) d
                ON d.term = t.term)""",
        f"""txt_ranked AS (
            SELECT tf.id, tf.kind,
                   sum(i.idf * tf.tf * {BM25_K1 + 1}
                       / (tf.tf + {BM25_K1} * (1 - {BM25_B} + {BM25_B} * tf.dl / s.avgdl)))
                   AS rank,
                   sum(i.weight) / (SELECT sum(weight) FROM txt_idf) AS coverage
              FROM txt_tf tf JOIN txt_idf i ON i.term = tf.term CROSS JOIN txt_stats s
             GROUP BY tf.id, tf.kind
             ORDER BY rank DESC, tf.id LIMIT %(depth)s)""",
    ]


@dataclass(frozen=True)
class _Filters:
    """A search's filters, compiled once for every plan: the records' condition (over ``r``),
    the summaries' (over ``s``; None when no summary can qualify) and the scope conjuncts on
    the embeddings' copy (over ``e``). Their parameters are bound in the statement's."""

    records: str
    summaries: str | None
    on_embedding: str

    @property
    def base(self) -> str:
        return f"records_memoryrecord r WHERE {self.records}"


def _filters(q: SearchQuery, params: dict[str, Any], *, summaries: bool) -> _Filters:
    records = candidate_predicate_sql(q, params)
    summary_where = _summary_candidate_sql(q, params) if summaries else None
    return _Filters(records, summary_where, _embedding_scope_sql(q))


@dataclass
class _Plan:
    """A plan's part of the statement: CTEs before the summaries (``prelude``), its records'
    ``vec_records`` CTEs (``vector``), the condition every ranking branch waits for (``gate``),
    the SQL of its candidate count (``counted``: a decision search's floor), and the rows the
    statement returns besides the hits (``source``, ``extra``: the count and index columns)."""

    name: str
    prelude: list[str] = field(default_factory=list)
    vector: list[str] = field(default_factory=list)
    gate: str = ""
    counted: str | None = None
    source: str = "ranked"
    extra: str = "NULL::bigint, NULL::boolean, NULL::boolean"


def _gated_plan(
    tenant_id: Any, model: str, q: SearchQuery, params: dict[str, Any], filters: _Filters
) -> _Plan:
    """The exact plan on a model with an HNSW index: its first CTE takes the filtered
    candidates (at most ``SEARCH_EXACT_LIMIT + 1``), every ranking branch runs only when they
    number at most ``SEARCH_EXACT_LIMIT``, and each row carries the count and whether the
    tenant and the searched domain have a valid index of their own; the statement also makes
    the HNSW scan settings for the HNSW statement that follows when they are many."""
    params["own_index"] = index_name(tenant_id, model)
    valid = "EXISTS (SELECT 1 FROM pg_index WHERE indisvalid AND indexrelid = to_regclass({}))"
    scoped = "false"
    if q.domain:
        params["domain_index"] = domain_index_name(tenant_id, model, q.domain)
        scoped = valid.format("%(domain_index)s")
    # The candidate list by which index turns out to serve the search (_ef_search).
    ef_search = (
        f"CASE WHEN owned.own AND owned.scoped THEN '{_ef_search(q, own=True, scoped=True)}' "
        f"WHEN owned.own THEN '{_ef_search(q, own=True, scoped=False)}' "
        f"WHEN owned.scoped THEN '{_ef_search(q, own=False, scoped=True)}' "
        f"ELSE '{_ef_search(q, own=False, scoped=False)}' END"
    )
    prelude = [
        f"owned AS MATERIALIZED (SELECT {valid.format('%(own_index)s')} AS own, "
        f"{scoped} AS scoped)",
        f"candidates AS MATERIALIZED (SELECT r.id FROM {filters.base} LIMIT {exact_limit() + 1})",
        f"""counted AS MATERIALIZED (
            SELECT c.n, owned.own, owned.scoped, c.n <= {exact_limit()} AS exact,
                   set_config('hnsw.iterative_scan', 'strict_order', true) AS s1,
                   set_config('hnsw.ef_search', {ef_search}, true) AS s2,
                   set_config('hnsw.max_scan_tuples', '{HNSW_MAX_SCAN_TUPLES}', true) AS s3
              FROM owned, (SELECT count(*) AS n FROM candidates) c)""",
    ]
    # Every ranking branch waits for the count (a one-time filter); the statement returns
    # at least one row (the count), even when the gate kept every branch shut.
    gate = " AND (SELECT exact FROM counted)"
    return _Plan(
        "exact",
        prelude=prelude,
        vector=_exact_records(filters, gate),
        gate=gate,
        counted="(SELECT n FROM counted)",
        source="counted LEFT JOIN ranked ON true",
        extra="counted.n, counted.own, counted.scoped",
    )


def _exact_plan(filters: _Filters) -> _Plan:
    """The exact plan on a model without an HNSW index: always exact, never counted."""
    return _Plan(
        "exact",
        vector=[
            f"candidates AS MATERIALIZED (SELECT r.id FROM {filters.base})",
            *_exact_records(filters, ""),
        ],
        counted="(SELECT count(*) FROM candidates)",
    )


def _exact_records(filters: _Filters, gate: str) -> list[str]:
    """The nearest candidates by an exact scan of their vectors."""
    return [
        f"""vec_records AS (
            SELECT e.record_id AS id, e.vector <=> %(vec)s::vector AS distance
              FROM derivations_embedding e JOIN candidates c ON c.id = e.record_id
             WHERE e.model = %(model)s AND e.tenant_id = %(tenant)s{filters.on_embedding}{gate}
             ORDER BY distance LIMIT %(depth)s)"""
    ]


def _hnsw_plan(dimension: int, filters: _Filters, *, own_index: bool, domain_index: bool) -> _Plan:
    """The HNSW plan: on the domain's index when ``domain_index``, else on the tenant's own
    when ``own_index``, else on the shared one."""
    # The tenant's own index is on the normalised vector (the same cosine distance): an
    # expression no shared index has, so the planner cannot pick the shared one. A domain's
    # index is on the normalised vector in half precision: the scan orders by that, the
    # ranking by the full-precision distance of what it returns.
    stored = f"e.vector::vector({dimension})"
    if domain_index:
        order = f"(l2_normalize({stored})::halfvec({dimension})) <=> %(vec)s::halfvec({dimension})"
        distance = "e.vector <=> %(vec)s::vector"
    else:
        if own_index:
            stored = f"l2_normalize({stored})::vector({dimension})"
        distance = order = f"({stored}) <=> %(vec)s::vector({dimension})"
    # The floor is not applied inside the scan: a scan told to skip vectors past the floor
    # would go on scanning (iteratively) for ones that are not. It decides which ranked rows
    # qualify (``ranked``). The scan's own count says whether it found ``k`` in the filters
    # at all (run_search): the statement always returns at least that row.
    scanned = f"""vec_scanned AS MATERIALIZED (
            SELECT e.record_id AS id, {distance} AS distance
              FROM derivations_embedding e
              JOIN records_memoryrecord r ON r.id = e.record_id
             WHERE e.model = %(model)s AND e.tenant_id = %(tenant)s{filters.on_embedding}
               AND {filters.records}
             ORDER BY {order} LIMIT %(depth)s)"""
    return _Plan(
        "hnsw",
        vector=[scanned, "vec_records AS (SELECT id, distance FROM vec_scanned)"],
        source="(SELECT count(*) AS n FROM vec_scanned) scanned LEFT JOIN ranked ON true",
        extra="scanned.n, NULL::boolean, NULL::boolean",
    )


def search_statement(
    *,
    tenant_id: Any,
    model: str,
    q: SearchQuery,
    query_vector: list[float] | None,
    summaries: bool = True,
    hnsw: bool = False,
    own_index: bool = False,
    domain_index: bool = False,
    now: datetime | None = None,
) -> SearchStatement:
    """Build a filter-then-rank statement: the filters compiled once (:func:`_filters`), then
    one plan's CTEs, the summaries' and the text's, fused (:func:`_ranking`).

    ``hnsw``: the HNSW plan (:func:`_hnsw_plan`). Otherwise a vector search on a model with
    an HNSW index gets the *gated* exact plan (:func:`_gated_plan`): a search with few
    candidates takes one round trip, and one with many learns in that round trip what the
    HNSW statement needs; on a model without one, the exact plan (:func:`_exact_plan`);
    without a vector, the text plan. ``summaries=False`` leaves the summary branch out (the
    tenant has never written one), which halves the statement's planning time.
    """
    params: dict[str, Any] = {
        "tenant": tenant_id,
        "now": now or timezone.now(),
        "k": q.top_k,
        "depth": max(q.top_k * 4, 40),
        "model": model,
    }
    if query_vector is not None:
        floor, inclusion = relevance_floors(q, model)
        params["max_distance"] = 1.0 - floor
        params["include_distance"] = 1.0 - inclusion
        params["vec"] = _vector_literal(query_vector)
    filters = _filters(q, params, summaries=summaries)
    dimension = HNSW_INDEXED.get(model) if query_vector is not None else None
    if query_vector is None:
        plan = _Plan("text")
    elif hnsw:
        assert dimension is not None
        plan = _hnsw_plan(dimension, filters, own_index=own_index, domain_index=domain_index)
    elif dimension is not None:
        plan = _gated_plan(tenant_id, model, q, params, filters)
    else:
        plan = _exact_plan(filters)
    parts = list(plan.prelude)
    if filters.summaries is not None:
        parts.append(
            f"summaries AS MATERIALIZED (SELECT s.id, s.text FROM derivations_summary s "
            f"WHERE {filters.summaries})"
        )
    parts += plan.vector
    vec_sources: list[str] = []
    if query_vector is not None:
        vec_sources.append("SELECT id, 'record' AS kind, distance FROM vec_records")
        if filters.summaries is not None:
            # Summaries are few beside records: always an exact scan of the valid ones.
            parts.append(
                f"""vec_summaries AS (
                    SELECT e.summary_id AS id, e.vector <=> %(vec)s::vector AS distance
                      FROM derivations_embedding e JOIN summaries s ON s.id = e.summary_id
                     WHERE e.model = %(model)s{plan.gate}
                     ORDER BY distance LIMIT %(depth)s)"""
            )
            vec_sources.append("SELECT id, 'summary' AS kind, distance FROM vec_summaries")
    name = plan.name
    if q.query:
        params["query"] = q.query
        parts += _text_leg(
            filters.base,
            plan.gate,
            summaries=filters.summaries is not None,
            counted=bool(plan.gate),
        )
        name = "text" if name == "text" else f"{name}+text"
    answer_distance = _answer_distance_sql(q, model, params, plan.counted)
    parts += _ranking(q, vec_sources, text=bool(q.query), answer_distance=answer_distance)
    # The hits' record rows come with the ranking, and whether each is in an open conflict:
    # no second round trip to load them, none to look for conflicts where there are none.
    record_columns = ", ".join(
        [*(f'rec."{f.column}"' for f in RECORD_FIELDS), open_conflict_sql("rec.id")]
    )
    distance_column = "ranked.distance"
    if query_vector is not None:
        # A hit found by its text alone still reports the similarity it had (below the
        # floor): one lookup by the unique (record or summary, model) index per hit.
        distance_column = """CASE WHEN ranked.distance IS NOT NULL OR ranked.id IS NULL
            THEN ranked.distance ELSE (
            SELECT e.vector <=> %(vec)s::vector FROM derivations_embedding e
             WHERE e.model = %(model)s AND CASE WHEN ranked.kind = 'record'
                   THEN e.record_id = ranked.id ELSE e.summary_id = ranked.id END) END"""
    columns = (
        f"ranked.id, ranked.kind, {distance_column}, ranked.rank, ranked.vec_position, "
        f"ranked.txt_position, ranked.score, {plan.extra}"
    )
    sql = (
        "WITH "
        + ",\n".join(parts)
        + f"""
        SELECT {columns}, {record_columns}
          FROM {plan.source}
          LEFT JOIN records_memoryrecord rec ON ranked.kind = 'record' AND rec.id = ranked.id
         ORDER BY ranked.score DESC, ranked.distance ASC NULLS LAST, ranked.id"""
    )
    return SearchStatement(plan=name, sql=sql, params=params, gated=bool(plan.gate))


def _ranking(
    q: SearchQuery, vec_sources: list[str], *, text: bool, answer_distance: str
) -> list[str]:
    """The fusion of the legs, ending in ``ranked``.

    The search answers only when something is relevant: its nearest candidate by meaning is
    at or above the floor (a decision search's, by its candidate count), or a candidate
    matches enough of its words, or a candidate at or above the inclusion floor (a little
    under the floor, for the models whose similarities crowd together: relevance_floors)
    matches some of its words. Then every row at or above the inclusion floor or matching
    enough words qualifies."""
    parts = []
    if vec_sources:
        parts.append(
            f"""vec AS (
                SELECT id, kind, distance,
                       row_number() OVER (ORDER BY distance, id) AS position
                  FROM ({" UNION ALL ".join(vec_sources)}) v
                 ORDER BY distance, id LIMIT %(depth)s)"""
        )
    near = f"(SELECT min(distance) FROM vec) <= {answer_distance}"
    if vec_sources and not text:
        # Vector only: the ranking is the vector order (RRF over one list), with no fusion
        # to plan; what qualifies is a prefix of that order.
        parts.append(
            f"""ranked AS (
                SELECT id, kind, distance, NULL::float8 AS rank, position AS vec_position,
                       NULL::bigint AS txt_position, 1.0 / ({RRF_K} + position) AS score
                  FROM vec
                 WHERE distance <= %(include_distance)s AND {near}
                 ORDER BY distance, id LIMIT %(k)s)"""
        )
        return parts
    if not vec_sources:
        parts.append(
            "vec AS (SELECT NULL::uuid AS id, NULL::text AS kind, NULL::float8 AS distance, "
            "NULL::bigint AS position WHERE false)"
        )
    if text:
        parts.append(
            """txt AS (
                SELECT id, kind, rank, coverage,
                       row_number() OVER (ORDER BY rank DESC, id) AS position
                  FROM (SELECT id, kind, rank, coverage FROM txt_ranked) t
                 ORDER BY rank DESC, id LIMIT %(depth)s)"""
        )
    else:
        parts.append(
            "txt AS (SELECT NULL::uuid AS id, NULL::text AS kind, NULL::float8 AS rank, "
            "NULL::float8 AS coverage, NULL::bigint AS position WHERE false)"
        )
    # A row qualifies by its meaning or by its words (enough of the query's weight matched);
    # whichever leg it qualifies by, both legs' ranks make its score, the words' in
    # proportion to its BM25 score beside the best match's: a memory that holds only a word
    # every memory holds ("user") gains little from ranking first among the few that hold it.
    qualifies = f"txt.coverage >= {TEXT_COVERAGE}"
    if vec_sources:
        words = f"(SELECT max(coverage) FROM txt) >= {TEXT_COVERAGE}"
        # Or the two legs agree: a candidate near enough to be included matches a fair part
        # of the query's words (not one word every memory holds).
        agree = (
            "EXISTS (SELECT 1 FROM vec JOIN txt ON txt.id = vec.id AND txt.kind = vec.kind "
            f"WHERE vec.distance <= %(include_distance)s AND txt.coverage >= {AGREE_COVERAGE})"
        )
        # Under the floor, only what stands as near as the nearest but for a margin. Not in
        # a decision search: its filters leave a few memories of the subject and scope, and
        # the one a decision needs is often further than a lookalike that shares the
        # question's words (docs/retrieval.md): every candidate at or above the inclusion
        # floor, up to top_k.
        included = "vec.distance <= %(include_distance)s"
        if q.purpose != "decision":
            included = (
                "vec.distance <= least(%(include_distance)s, greatest(%(max_distance)s, "
                f"(SELECT min(distance) FROM vec) + {INCLUSION_SPREAD}))"
            )
        qualifies = f"({included} OR {qualifies}) AND ({near} OR {words} OR {agree})"
    parts.append(
        f"""ranked AS (
            SELECT coalesce(vec.id, txt.id) AS id, coalesce(vec.kind, txt.kind) AS kind,
                   vec.distance, txt.rank, vec.position AS vec_position,
                   txt.position AS txt_position,
                   coalesce(1.0 / ({RRF_K} + vec.position), 0)
                   + coalesce(
                       txt.rank / (SELECT max(rank) FROM txt) / ({RRF_K} + txt.position), 0
                   ) AS score
              FROM vec FULL OUTER JOIN txt ON vec.id = txt.id AND vec.kind = txt.kind
             WHERE {qualifies}
             ORDER BY score DESC, vec.distance ASC NULLS LAST, id
             LIMIT %(k)s)"""
    )
    return parts


def run_search(
    cursor: Any,
    *,
    tenant_id: Any,
    model: str,
    q: SearchQuery,
    query_vector: list[float] | None,
    summaries: bool = True,
    now: datetime | None = None,
) -> tuple[SearchStatement, list[Sequence[Any]]]:
    """Run a search inside the tenant's transaction: the statement that ran last, its rows.

    One statement when the filtered candidates are few enough for the exact plan (or there is
    no vector); two when they are not: the gated statement, then the HNSW one. Filters that
    had too many candidates a moment ago (the ``search_plans`` cache) skip the gated
    statement: the HNSW settings, then the HNSW statement; and if that returns fewer than
    ``top_k`` rows, the gated run after all.
    """
    build = partial(
        search_statement,
        tenant_id=tenant_id,
        model=model,
        q=q,
        query_vector=query_vector,
        summaries=summaries,
        now=now or timezone.now(),
    )
    plans = caches["search_plans"]
    key = None
    if query_vector is not None and model in HNSW_INDEXED and q.as_of is None:
        key = _plan_key(tenant_id, model, q)
        remembered = plans.get(key)
        if remembered is not None:
            own, scoped = remembered
            ef_search = _ef_search(q, own=own, scoped=scoped)
            cursor.execute(HNSW_SETTINGS_SQL, {"ef_search": str(ef_search)})
            cursor.fetchall()
            statement = build(hnsw=True, own_index=own, domain_index=scoped)
            cursor.execute(statement.sql, statement.params)
            rows = cursor.fetchall()
            if rows[0][COUNT_COLUMN] >= q.top_k:
                return statement, rows
            plans.delete(key)  # fewer candidates than remembered: count them again
    statement = build()
    cursor.execute(statement.sql, statement.params)
    rows = cursor.fetchall()
    if statement.gated:
        count, own, scoped = rows[0][COUNT_COLUMN : COUNT_COLUMN + 3]
        if count > exact_limit():
            if key is not None:
                plans.set(key, (bool(own), bool(scoped)))
            statement = build(hnsw=True, own_index=bool(own), domain_index=bool(scoped))
            cursor.execute(statement.sql, statement.params)
            rows = cursor.fetchall()
    return statement, rows


RECORD_ATTNAMES = [f.attname for f in RECORD_FIELDS]


def _record_from_row(values: Sequence[Any]) -> MemoryRecord:
    """A record from its columns in ``RECORD_FIELDS`` order, as the ORM loads it: each
    field's ``from_db_value`` (JSON, say), then ``Model.from_db``. The generated full-text
    column is left deferred, as a query that omits it."""
    row = [
        f.from_db_value(value, None, connection) if hasattr(f, "from_db_value") else value
        for f, value in zip(RECORD_FIELDS, values, strict=True)
    ]
    return MemoryRecord.from_db(reading().alias, RECORD_ATTNAMES, row)


def search_scoped(
    *, tenant: Tenant, q: SearchQuery, actor: Actor, audit: bool = True
) -> SearchResult:
    """Run a scoped search for the current tenant (RLS) and return the fused top ``k``.
    A decision search is audited with what it returned, unless ``audit`` is False (the
    replay of a search already audited under its Idempotency-Key)."""
    embedder = get_embedder(tenant.embedding_model)
    query_vector = query_vector_for(q, embedder.name)
    with reading().cursor() as cursor:
        statement, rows = run_search(
            cursor,
            tenant_id=tenant.pk,
            model=embedder.name,
            q=q,
            query_vector=query_vector,
            summaries=tenant.summaries_written,
        )
    records = {
        row[0]: _record_from_row(row[RANKING_COLUMNS:CONFLICT_COLUMN])
        for row in rows
        if row[1] == "record" and row[RANKING_COLUMNS] is not None
    }
    summary_ids = [row[0] for row in rows if row[1] == "summary"]
    found: dict[uuid.UUID, Summary] = {}
    if summary_ids:
        found = {
            s.pk: s
            for s in Summary.objects.filter(pk__in=summary_ids, valid=True).prefetch_related(
                "sources"
            )
        }
    hits = []
    for row in rows:
        item = records.get(row[0]) if row[1] == "record" else found.get(row[0])
        if item is None:
            continue
        hits.append(
            Hit(
                record=item if isinstance(item, MemoryRecord) else None,
                summary=item if isinstance(item, Summary) else None,
                score=float(row[6]),
                vector_similarity=similarity_from_distance(row[2]),
                text_rank=None if row[3] is None else float(row[3]),
                vector_position=row[4],
                text_position=row[5],
            )
        )
    # Each record hit says whether an open conflict contradicts it and who confirmed it. A
    # decision search returns such a hit, marked: the current value holds until a reviewer
    # resolves the conflict (docs/retrieval.md, "Decision-time trust").
    decision_trust_annotate(
        (h.record for h in hits if h.record is not None),
        conflicts_checked=not any(row[CONFLICT_COLUMN] for row in rows),
    )
    abstention = None
    if not hits:
        abstention = search_abstention(
            tenant=tenant, model=embedder.name, q=q, query_vector=query_vector
        )
        search_abstentions.labels(abstention.reason).inc()
    data: dict[str, Any] = {
        "filters": _audited_filters(q),
        "returned": [str(h.pk) for h in hits],
        "plan": statement.plan,
    }
    if q.purpose == "decision" and audit:
        # What the agent relied on for a decision is part of the record, and so is which of
        # it was disputed when it did. The filters (never the query's text) let a replay
        # find what became a candidate since (apps.evaluation.replay).
        disputed = [str(h.pk) for h in hits if getattr(h.record, "open_conflict_id", None)]
        if disputed:
            data["in_conflict"] = disputed
        audit_record(
            tenant=tenant, actor=actor, action="search.decision", object_type="search", data=data
        )
    if q.purpose == "context" and audit:
        restricted = any(h.item.sensitivity == Sensitivity.RESTRICTED for h in hits)
        audit_read(
            tenant=tenant, actor=actor, action="search.context", data=data, restricted=restricted
        )
    return SearchResult(hits=hits, plan=statement.plan, model=embedder.name, abstention=abstention)


def _audited_filters(q: SearchQuery) -> dict[str, Any]:
    """What a read audit keeps of a search: its filters. Not the query's text, which may
    quote memory content or personal data, nor a vector."""
    scope = {"domain": q.domain, "task_type": q.task_type, "conditions": q.conditions}
    filters = {
        "scope": {name: value for name, value in scope.items() if value},
        "scope_match": q.scope_match,
        "subject": q.subject,
        "keys": q.keys,
        "sensitivity_max": q.sensitivity_max,
        "as_of": q.as_of,
        "top_k": q.top_k,
    }
    return {name: value for name, value in filters.items() if value}


def query_of_audited_filters(filters: dict[str, Any], *, purpose: str) -> SearchQuery:
    """The search an audit event's ``filters`` (:func:`_audited_filters`) describe, without
    its text: the same candidates, nothing to rank them by."""
    scope = filters.get("scope") or {}
    as_of = filters.get("as_of")
    return SearchQuery(
        purpose=purpose,
        domain=str(scope.get("domain") or ""),
        task_type=str(scope.get("task_type") or ""),
        conditions=scope.get("conditions") or None,
        scope_match=str(filters.get("scope_match") or "contained"),
        subject=str(filters.get("subject") or ""),
        keys=[str(key) for key in filters.get("keys") or []],
        sensitivity_max=str(filters.get("sensitivity_max") or ""),
        as_of=parse_datetime(str(as_of)) if as_of else None,
        top_k=int(filters.get("top_k") or 10),
    )


def _candidate_count(tenant: Tenant, q: SearchQuery) -> int:
    """How many records pass ``q``'s filters (at most ``SEARCH_EXACT_LIMIT + 1``)."""
    params: dict[str, Any] = {"tenant": tenant.pk, "now": timezone.now()}
    where = candidate_predicate_sql(q, params)
    with reading().cursor() as cursor:
        cursor.execute(
            f"SELECT count(*) FROM (SELECT 1 FROM records_memoryrecord r WHERE {where} "
            f"LIMIT {exact_limit() + 1}) c",
            params,
        )
        row = cursor.fetchone()
    return int(row[0]) if row else 0


def _ranked_rows(
    tenant: Tenant, model: str, q: SearchQuery, query_vector: list[float] | None
) -> list[Sequence[Any]]:
    """The ranking rows of ``q`` over records alone (the diagnosis of an empty answer)."""
    with reading().cursor() as cursor:
        _statement, rows = run_search(
            cursor,
            tenant_id=tenant.pk,
            model=model,
            q=q,
            query_vector=query_vector,
            summaries=False,
        )
    return rows


def search_abstention(
    *, tenant: Tenant, model: str, q: SearchQuery, query_vector: list[float] | None
) -> Abstention:
    """Why ``q`` found nothing (run only then: the search itself stays one statement)."""
    candidates = _candidate_count(tenant, q)
    if candidates == 0:
        provisional = 0
        if q.purpose == "decision":
            provisional = _candidate_count(tenant, replace(q, purpose="context"))
        if provisional:
            return Abstention(
                reason="only_provisional",
                detail=f"Only provisional memories are in scope ({provisional}); a decision acts "
                "on confirmed ones. Ask a reviewer to confirm them, or search with purpose "
                "context.",
                candidates=0,
            )
        return Abstention(
            reason="nothing_in_scope",
            detail="No memory passes the filters (scope, subject, keys, sensitivity, expiry).",
            candidates=0,
        )
    if q.purpose == "decision":
        rows = _ranked_rows(tenant, model, replace(q, purpose="context"), query_vector)
        if any(row[0] is not None and row[1] == "record" for row in rows):
            return Abstention(
                reason="only_provisional",
                detail="Only provisional memories match; a decision acts on confirmed ones.",
                candidates=candidates,
            )
    if query_vector is None:
        return Abstention(
            reason="nothing_matched",
            detail="No memory in scope matched enough of the query's words.",
            candidates=candidates,
        )
    floor = relevance_floor(q, model, candidates)
    if q.min_similarity is not None:
        whose = "the request's min_similarity"
    elif _decision_curve(q, model) is not None:
        whose = f"{model}'s for a decision over {candidates} candidates"
    else:
        whose = f"{model}'s"
    nearest = replace(q, query="", top_k=1, min_similarity=0.0)
    rows = _ranked_rows(tenant, model, nearest, query_vector)
    distances = [row[2] for row in rows if row[0] is not None and row[2] is not None]
    best = similarity_from_distance(min(distances)) if distances else None
    return Abstention(
        reason="below_floor",
        detail="No memory in scope matched enough of the query's words, and the nearest by "
        f"meaning is below the relevance floor ({floor:.3f}, {whose}).",
        candidates=candidates,
        best_similarity=None if best is None else round(best, 6),
        floor=round(floor, 6),
    )
