"""Scoped retrieval: the search API beside raw SQL, a bare DRF endpoint and numpy brute force.

    .venv/bin/python benchmarks/retrieval_search.py [--records 100000] [--tenants 50]
        [--big-tenant-share 0.2] [--queries 10000] [--latency-queries 200] [--clients 1,8]

    # the 1M variant
    .venv/bin/python benchmarks/retrieval_search.py --records 1000000 --big-tenant-share 0.3

    # keep the data set (--keep), then measure again on it in minutes (--reuse, same sizes)
    .venv/bin/python benchmarks/retrieval_search.py --records 1000000 --big-tenant-share 0.3 --reuse

Builds a data set on the embedded database: ``--records`` memory records across ``--tenants``
tenants, one of them holding ``--big-tenant-share`` of them; scopes (domain, task_type,
conditions) nested so that a query's scope matches 0.1 %, 1 %, 10 % or 100 % of the big
tenant; 60 % confirmed trust; 10 % expired; 384-dimension unit vectors drawn from a mixture of
gaussians (topics of uneven size, as real embeddings cluster) stored as ``client-384``
embeddings. Rows are loaded with COPY as the owner role under each tenant's context (row-level
security checks every row), the HNSW index is built after loading, then the product's
tenant-index sync (``apps.retrieval.tenant_indexes``: a tenant with 10,000 or more vectors gets
an HNSW index of its own, so both runs' big tenants do, and the 1M run's other tenants too;
inside such a tenant a domain with 10,000 or more, at most half of the tenant's, gets one as
well: the 1M run's big tenant's seven domains, so its 10 % scope, one domain, walks its
domain's graph), then VACUUM (ANALYZE): a loaded table is otherwise vacuumed by autovacuum
soon after, which at 100k fell inside the first timed cells.

Then prints, per selectivity and with 1 and N concurrent clients (each client its own process
and connection): search p50/p95/p99 and requests/s through the HTTP API (gunicorn on
loopback, agent credential); the same filtered statement as raw SQL (psycopg, no
prepared-statement reuse); a bare DRF endpoint running that SQL (no authentication, no ORM,
no serialisation: the floor for any Django API); exact numpy brute force over the same
candidates; for the API, its requests/s over the bare endpoint's and its p50 over the raw
SQL's (issue 38's ratio, target at most 1.3x). Then recall@10 against exact search and
under-returned queries over ``--queries`` searches through the product's search function, the
EXPLAIN plan per selectivity, and the issue's targets beside the measurements. Text-embedding
time (hashing embedder) is reported separately: these searches send vectors.
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import pickle
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.harness import (
    ROOT,
    Timing,
    bench_database,
    histogram,
    progress,
    setup_django,
    table,
)

DIM = 384
MODEL = "client-384"
HNSW_INDEX = "embedding_hnsw_client_384"
TOPICS = 2000
NOISE = 0.6  # per-coordinate noise beside unit-variance topic centres: cosine ~0.7 in a topic
TOP_K = 10
OTHER_DOMAINS = ("commerce", "support", "travel", "health", "legal", "ops")
OTHER_TASKS = ("invoice", "lookup", "checkout", "triage", "plan")
REGIONS = ("eu", "us", "apac")
SENSITIVITIES = ("public", "internal", "personal")
# Nested scopes: each selectivity is a share of the big tenant's records (before expiry).
SCOPES: dict[str, dict[str, Any] | None] = {
    "0.1%": {"domain": "billing", "task_type": "refund", "conditions": {"priority": "high"}},
    "1%": {"domain": "billing", "task_type": "refund"},
    "10%": {"domain": "billing"},
    "100%": None,
}
SCOPED = ("0.1%", "1%", "10%")
PATHS = ("HTTP API", "bare DRF", "raw SQL", "numpy exact")
BARE_PATH = "/bench/search-sql"

FACT_COLUMNS = "id, tenant_id, subject, key, scope_id, current_id, last_version, created_at"
RECORD_COLUMNS = (
    "id, tenant_id, fact_id, subject, key, version, value, content, source_kind, source_ref, "
    "source_turn_id, source_tool_call_id, source_run_id, writer_type, writer_id, writer_label, "
    "observed_at, written_at, owner, reason, scope_domain, scope_task_type, scope_conditions, "
    "sensitivity, retention_basis, consent_ref, ttl_requested, expires_at, redaction_state, "
    "redaction_fields, trust, status, current_from, is_current"
)
EMBEDDING_COLUMNS = "tenant_id, record_id, model, dimension, vector, content_digest, created_at"
STAGING = (
    ("records_fact", "stage_fact", FACT_COLUMNS),
    ("records_memoryrecord", "stage_record", RECORD_COLUMNS),
    ("derivations_embedding", "stage_embedding", EMBEDDING_COLUMNS),
)
EMBEDDING_TYPES = ["uuid", "uuid", "varchar", "int4", "vector", "varchar", "timestamptz"]


# --- data set --------------------------------------------------------------------------------


@dataclass
class Corpus:
    """The big tenant's records as the benchmark needs them for ground truth."""

    ids: list[uuid.UUID]
    vectors: np.ndarray  # float32, unit rows
    masks: dict[str, np.ndarray]  # selectivity -> candidate rows (live, in scope)


class Mixture:
    """Unit vectors around topics of uneven size (a few big topics, a long tail)."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.centers = rng.normal(size=(TOPICS, DIM)).astype(np.float32)
        weights = 1.0 / np.arange(1, TOPICS + 1) ** 0.8
        self.weights = weights / weights.sum()

    def sample(self, rng: np.random.Generator, count: int) -> tuple[np.ndarray, np.ndarray]:
        topics = rng.choice(TOPICS, size=count, p=self.weights)
        vectors = self.centers[topics] + NOISE * rng.normal(size=(count, DIM)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors.astype(np.float32), topics


def tenant_sizes(records: int, tenants: int, big_share: float) -> list[int]:
    big = round(records * big_share)
    rest, extra = divmod(records - big, tenants - 1)
    return [big] + [rest + (1 if i < extra else 0) for i in range(tenants - 1)]


def scope_of(rank: int) -> tuple[str, str, dict[str, str]]:
    """Scope by a record's rank in a random permutation, so the shares are exact."""
    domain = "billing" if rank % 10 == 0 else OTHER_DOMAINS[rank % len(OTHER_DOMAINS)]
    task_type = "refund" if rank % 100 == 0 else OTHER_TASKS[rank % len(OTHER_TASKS)]
    conditions = {
        "region": REGIONS[rank % len(REGIONS)],
        "priority": "high" if rank % 1000 == 0 else "normal",
    }
    return domain, task_type, conditions


def matches(scope: dict[str, Any] | None, domain: str, task: str, cond: dict[str, str]) -> bool:
    if scope is None:
        return True
    return (
        scope.get("domain", domain) == domain
        and scope.get("task_type", task) == task
        and all(cond.get(k) == v for k, v in (scope.get("conditions") or {}).items())
    )


def owner_connection() -> Any:
    import psycopg
    from django.conf import settings

    owner = settings.DATABASE_OWNER
    return psycopg.connect(
        host=owner.get("HOST") or None,
        port=owner.get("PORT") or None,
        user=owner["USER"],
        password=owner.get("PASSWORD") or None,
        dbname=os.environ["MEMORYCONSOLE_DATABASE_NAME"],
    )


def app_conninfo() -> dict[str, Any]:
    from django.conf import settings

    app = settings.DATABASE_APP
    return {
        "host": app.get("HOST") or None,
        "port": app.get("PORT") or None,
        "user": app["USER"],
        "password": app.get("PASSWORD") or None,
        "dbname": os.environ["MEMORYCONSOLE_DATABASE_NAME"],
    }


def scope_rows(
    cursor: Any, tenant_id: uuid.UUID, scopes: list[tuple[str, str, dict[str, str]]], now: datetime
) -> dict[str, uuid.UUID]:
    """The tenant's scope rows for these scopes (a fact's identity includes its scope),
    created where new; their ids by canonical form."""
    from apps.records.models import scope_canonical

    wanted = {scope_canonical(*scope): scope for scope in scopes}
    for canonical, (domain, task, cond) in wanted.items():
        cursor.execute(
            "INSERT INTO records_scope (id, tenant_id, domain, task_type, conditions, canonical, "
            "created_at) VALUES (%s, %s, %s, %s, %s, %s, %s) "
            "ON CONFLICT (tenant_id, canonical) DO NOTHING",
            [uuid.uuid4(), tenant_id, domain, task, json.dumps(cond), canonical, now],
        )
    cursor.execute(
        "SELECT canonical, id FROM records_scope WHERE tenant_id = %s AND canonical = ANY(%s)",
        [tenant_id, list(wanted)],
    )
    return dict(cursor.fetchall())


def load_tenant_chunk(
    conn: Any,
    tenant_id: uuid.UUID,
    start: int,
    vectors: np.ndarray,
    topics: np.ndarray,
    ranks: np.ndarray,
    rng: np.random.Generator,
    now: datetime,
    expired_share: float,
) -> tuple[list[uuid.UUID], list[bool], list[tuple[str, str, dict[str, str]]]]:
    """Load one chunk of a tenant's facts, records and embeddings in one transaction."""
    from apps.records.models import scope_canonical

    count = len(vectors)
    record_ids = [uuid.uuid4() for _ in range(count)]
    fact_ids = [uuid.uuid4() for _ in range(count)]
    expired = rng.random(count) < expired_share
    confirmed = rng.random(count) < 0.6
    expiry_kind = rng.random(count)
    sensitivity = rng.integers(0, len(SENSITIVITIES), size=count)
    scopes = [scope_of(int(r)) for r in ranks]
    yesterday, next_month = now - timedelta(days=1), now + timedelta(days=30)
    with conn.transaction():
        conn.execute("SELECT set_config('memoryconsole.tenant_id', %s, true)", [str(tenant_id)])
        cursor = conn.cursor()
        scope_ids = scope_rows(cursor, tenant_id, scopes, now)
        with cursor.copy(f"COPY stage_fact ({FACT_COLUMNS}) FROM STDIN") as copy:
            for i in range(count):
                n = start + i
                copy.write_row(
                    (
                        fact_ids[i],
                        tenant_id,
                        f"item:{n}",
                        "doc.note",
                        scope_ids[scope_canonical(*scopes[i])],
                        record_ids[i],
                        1,
                        now,
                    )
                )
        with cursor.copy(f"COPY stage_record ({RECORD_COLUMNS}) FROM STDIN") as copy:
            for i in range(count):
                n = start + i
                domain, task, cond = scopes[i]
                expires = (
                    yesterday if expired[i] else (None if expiry_kind[i] < 0.5 else next_month)
                )
                copy.write_row(
                    (
                        record_ids[i],
                        tenant_id,
                        fact_ids[i],
                        f"item:{n}",
                        "doc.note",
                        1,
                        json.dumps(n),
                        f"{domain} {task} note on topic t{topics[i]} for item {n}",
                        "document",
                        f"doc:{n}",
                        "",
                        "",
                        "",
                        "system",
                        "",
                        "benchmark load",
                        now,
                        now,
                        "service:bench",
                        "retrieval benchmark",
                        domain,
                        task,
                        json.dumps(cond),
                        SENSITIVITIES[sensitivity[i]],
                        "indefinite",
                        "",
                        None,
                        expires,
                        "none",
                        [],
                        "confirmed" if confirmed[i] else "provisional",
                        "active",
                        now,
                        True,
                    )
                )
        with cursor.copy(
            f"COPY stage_embedding ({EMBEDDING_COLUMNS}) FROM STDIN WITH (FORMAT BINARY)"
        ) as copy:
            copy.set_types(EMBEDDING_TYPES)
            for i in range(count):
                copy.write_row((tenant_id, record_ids[i], MODEL, DIM, vectors[i], "-", now))
        # COPY cannot write through row-level security; INSERT ... SELECT can, and the policy
        # still checks every row against the tenant context.
        for table_name, staging, columns in STAGING:
            cursor.execute(
                f"INSERT INTO {table_name} ({columns}) SELECT {columns} FROM {staging}"  # noqa: S608 - constant names
            )
            cursor.execute(f"TRUNCATE {staging}")
    return record_ids, [bool(x) for x in expired], scopes


def build_corpus(args: argparse.Namespace) -> tuple[Any, str, Corpus, Mixture, dict[str, float]]:
    """Create tenants and a credential, load every tenant's rows, index, VACUUM (ANALYZE)."""
    from pgvector.psycopg import register_vector

    from apps.core.actors import Actor
    from apps.tenancy.context import tenant_scope
    from apps.tenancy.models import Tenant
    from apps.tenancy.services import credential_issue, tenant_create

    rng = np.random.default_rng(args.seed)
    mixture = Mixture(rng)
    timings: dict[str, float] = {}
    started = time.perf_counter()
    tenants = [
        tenant_create(slug=f"bench-{i:02d}", name=f"Benchmark {i}") for i in range(args.tenants)
    ]
    Tenant.objects.filter(pk__in=[t.pk for t in tenants]).update(embedding_model=MODEL)
    big = Tenant.objects.get(pk=tenants[0].pk)
    with tenant_scope(big.pk):
        _credential, token = credential_issue(
            tenant=big, name="bench", actions="search", actor=Actor.system("benchmark")
        )
    timings["tenants"] = time.perf_counter() - started

    conn = owner_connection()
    register_vector(conn)
    # One index build after loading is far faster than growing the graph row by row.
    conn.execute(f"DROP INDEX IF EXISTS {HNSW_INDEX}")
    for table_name, staging, columns in STAGING:
        # Session-local staging tables: the column types only, no constraints, no policy.
        conn.execute(
            f"CREATE TEMP TABLE {staging} AS SELECT {columns} FROM {table_name} WITH NO DATA"  # noqa: S608 - constant names
        )
    conn.commit()
    sizes = tenant_sizes(args.records, args.tenants, args.big_tenant_share)
    now = datetime.now(UTC)
    chunk = 50_000
    loaded = 0
    big_ids: list[uuid.UUID] = []
    big_vectors: list[np.ndarray] = []
    big_live: list[bool] = []
    big_scopes: list[tuple[str, str, dict[str, str]]] = []
    started = time.perf_counter()
    for index, (tenant, size) in enumerate(zip(tenants, sizes, strict=True)):
        ranks = rng.permutation(size)
        for start in range(0, size, chunk):
            vectors, topics = mixture.sample(rng, min(chunk, size - start))
            ids, expired, scopes = load_tenant_chunk(
                conn,
                tenant.pk,
                start,
                vectors,
                topics,
                ranks[start : start + len(vectors)],
                rng,
                now,
                args.expired_share,
            )
            if index == 0:
                big_ids.extend(ids)
                big_vectors.append(vectors)
                big_live.extend(not e for e in expired)
                big_scopes.extend(scopes)
            loaded += len(vectors)
            elapsed = time.perf_counter() - started
            progress(
                f"loaded {loaded:,}/{args.records:,} records "
                f"({loaded / elapsed:,.0f} records/s, tenant {index + 1}/{args.tenants})"
            )
    timings["load"] = time.perf_counter() - started

    progress(f"building the HNSW index on {args.records:,} vectors ...")
    started = time.perf_counter()
    conn.execute(f"SET maintenance_work_mem = '{args.maintenance_work_mem}'")
    conn.execute("SET max_parallel_maintenance_workers = 1")
    conn.execute(
        f"CREATE INDEX {HNSW_INDEX} ON derivations_embedding "
        f"USING hnsw ((vector::vector({DIM})) vector_cosine_ops) WHERE model = '{MODEL}'"
    )
    conn.commit()
    timings["hnsw"] = time.perf_counter() - started
    # The product's own upkeep: tenants above the threshold get an HNSW index of their own.
    from apps.retrieval.tenant_indexes import tenant_indexes_sync

    started = time.perf_counter()
    built = tenant_indexes_sync(maintenance_work_mem=args.maintenance_work_mem, progress=progress)
    timings["tenant_hnsw"] = time.perf_counter() - started
    size_of = {t.pk: size for t, size in zip(tenants, sizes, strict=True)}
    timings["tenant_hnsw_count"] = float(len(built.create))
    timings["domain_hnsw_count"] = float(len(built.create_domains))
    timings["tenant_hnsw_rows"] = float(sum(size_of[t] for t, _model, _dim in built.create))
    # VACUUM, not only ANALYZE: the freshly inserted rows would have autovacuum start on
    # these tables (its insert threshold) in the middle of the timing, taking a core.
    progress("VACUUM (ANALYZE) ...")
    started = time.perf_counter()
    conn.autocommit = True
    conn.execute("VACUUM (ANALYZE)")
    conn.close()
    timings["analyze"] = time.perf_counter() - started

    live = np.array(big_live)
    masks = {
        name: live & np.array([matches(scope, *s) for s in big_scopes])
        for name, scope in SCOPES.items()
    }
    corpus = Corpus(ids=big_ids, vectors=np.concatenate(big_vectors), masks=masks)
    return big, token, corpus, mixture, timings


def load_corpus(args: argparse.Namespace) -> tuple[Any, str, Corpus, Mixture, dict[str, float]]:
    """The data set a ``--keep`` run left, read back: the big tenant's rows, vectors and scopes
    (the same seed gives the same topics, so the same queries), and a new credential."""
    from pgvector.psycopg import register_vector

    from apps.core.actors import Actor
    from apps.tenancy.context import tenant_scope
    from apps.tenancy.models import Tenant
    from apps.tenancy.services import credential_issue

    mixture = Mixture(np.random.default_rng(args.seed))  # build_corpus's first draws
    big = Tenant.objects.filter(slug="bench-00").first()
    if big is None:
        sys.exit("The kept database holds no benchmark data set: run once with --keep.")
    with tenant_scope(big.pk):
        _credential, token = credential_issue(
            tenant=big,
            name=f"bench-{uuid.uuid4().hex[:8]}",
            actions="search",
            actor=Actor.system("benchmark"),
        )
    progress("reading the kept data set ...")
    started = time.perf_counter()
    conn = owner_connection()
    register_vector(conn)
    conn.execute("SELECT set_config('memoryconsole.tenant_id', %s, false)", [str(big.pk)])
    rows = (
        conn.cursor(binary=True)
        .execute(
            "SELECT r.id, e.vector, r.expires_at, r.scope_domain, r.scope_task_type, "
            "r.scope_conditions FROM records_memoryrecord r JOIN derivations_embedding e "
            "ON e.record_id = r.id AND e.model = %s WHERE r.tenant_id = %s",
            [MODEL, big.pk],
        )
        .fetchall()
    )
    conn.close()
    now = datetime.now(UTC)
    live = np.array([expires is None or expires > now for _id, _v, expires, *_s in rows])
    masks = {
        name: live & np.array([matches(scope, *r[3:]) for r in rows])
        for name, scope in SCOPES.items()
    }
    vectors = np.stack([r[1].to_numpy() for r in rows]).astype(np.float32)
    corpus = Corpus(ids=[r[0] for r in rows], vectors=vectors, masks=masks)
    return big, token, corpus, mixture, {"read": time.perf_counter() - started}


# --- queries and ground truth -----------------------------------------------------------------


@dataclass
class QuerySet:
    name: str
    scope: dict[str, Any] | None
    vectors: np.ndarray
    truth: list[list[uuid.UUID]]  # exact top-k over the candidates, per query


def relevance_floor() -> float:
    from apps.derivations.embedders import get_embedder

    return get_embedder(MODEL).relevance_floor


def exact_top_k(corpus: Corpus, mask: np.ndarray, queries: np.ndarray) -> list[list[uuid.UUID]]:
    """The exact top k over the candidates that pass the relevance floor (a search returns
    nothing below it)."""
    rows = np.flatnonzero(mask)
    candidates = corpus.vectors[rows].astype(np.float64)
    floor = relevance_floor()
    truth: list[list[uuid.UUID]] = []
    for start in range(0, len(queries), 256):
        scores = queries[start : start + 256].astype(np.float64) @ candidates.T
        k = min(TOP_K, len(rows))
        top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
        for q, picked in enumerate(top):
            ordered = picked[np.argsort(-scores[q, picked])]
            truth.append([corpus.ids[rows[i]] for i in ordered if scores[q, i] >= floor])
    return truth


def query_sets(corpus: Corpus, mixture: Mixture, total: int, seed: int) -> dict[str, QuerySet]:
    rng = np.random.default_rng(seed + 1)
    per_class = max(1, total // len(SCOPES))
    sets = {}
    for name, scope in SCOPES.items():
        vectors, _topics = mixture.sample(rng, per_class)
        sets[name] = QuerySet(
            name, scope, vectors, exact_top_k(corpus, corpus.masks[name], vectors)
        )
    return sets


def search_body(scope: dict[str, Any] | None, vector: np.ndarray) -> dict[str, Any]:
    body: dict[str, Any] = {"vector": [round(float(x), 7) for x in vector], "top_k": TOP_K}
    if scope is not None:
        # The data set marks selectivity in conditions the memories hold beyond the search's:
        # the filter that keeps such a memory is the exact one.
        body["scope"] = scope
        body["scope_match"] = "exact"
    return body


# --- the bare DRF endpoint (routed only by benchmarks/retrieval_search_urls.py) -------------


def bare_search_urlpatterns() -> list[Any]:
    """``POST /bench/search-sql``: the product's search statement, nothing else.

    No authentication, no validation beyond reading the body, no ORM, no serialiser: DRF's
    request/response cycle around the same SQL, as cheap as a Django API can be.
    """
    from django.db import connection
    from django.urls import path
    from rest_framework.permissions import AllowAny
    from rest_framework.request import Request
    from rest_framework.response import Response
    from rest_framework.views import APIView

    from apps.retrieval.search import SearchQuery, run_search

    class BareSearchView(APIView):
        authentication_classes: list[Any] = []
        permission_classes = [AllowAny]

        def post(self, request: Request) -> Response:
            body = request.data
            scope = body.get("scope") or {}
            q = SearchQuery(
                vector=body["vector"],
                domain=scope.get("domain", ""),
                task_type=scope.get("task_type", ""),
                conditions=scope.get("conditions"),
                top_k=body.get("top_k", TOP_K),
                scope_match=body.get("scope_match", "contained"),
            )
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT set_config('memoryconsole.tenant_id', %s, true)", [body["tenant"]]
                )
                # The benchmark's tenants write no summaries: the product leaves the summary
                # branch out for them too.
                statement, rows = run_search(
                    cursor,
                    tenant_id=body["tenant"],
                    model=MODEL,
                    q=q,
                    query_vector=q.vector,
                    summaries=False,
                )
            return Response(
                {
                    "results": [{"id": str(r[0]), "distance": r[2]} for r in rows],
                    "plan": statement.plan,
                }
            )

    return [path(BARE_PATH.lstrip("/"), BareSearchView.as_view())]


# --- clients ------------------------------------------------------------------------------------


class RecordingCursor:
    """A psycopg cursor that remembers what it ran (to replay the product's statements)."""

    def __init__(self, cursor: Any) -> None:
        self.cursor = cursor
        self.executed: list[tuple[str, dict[str, Any]]] = []

    def execute(self, sql: str, params: Any = None) -> None:
        self.executed.append((sql, params))
        self.cursor.execute(sql, params)

    def fetchall(self) -> Any:
        return self.cursor.fetchall()


@dataclass
class Statement:
    """What the product runs for one query class once it has seen it: one statement, or the
    HNSW settings and the HNSW statement (the last is the plan that answers)."""

    statements: list[tuple[str, dict[str, Any]]]
    plan: str

    @property
    def sql(self) -> str:
        return self.statements[-1][0]


def product_statement(conn: Any, tenant_id: uuid.UUID, q: QuerySet) -> Statement:
    """The statements ``search_scoped`` runs for this query class, captured from the product."""
    from apps.retrieval.search import SearchQuery, run_search

    scope = q.scope or {}
    query = SearchQuery(
        vector=[float(x) for x in q.vectors[0]],
        domain=scope.get("domain", ""),
        task_type=scope.get("task_type", ""),
        conditions=scope.get("conditions"),
        top_k=TOP_K,
        scope_match="exact",
    )
    # Twice: the second run is the one a server answers with once it has seen the filters
    # (a class with many candidates then skips the count: apps.retrieval.search).
    for _run in range(2):
        with conn.transaction():
            conn.execute("SELECT set_config('memoryconsole.tenant_id', %s, true)", [str(tenant_id)])
            recorder = RecordingCursor(conn.cursor())
            statement, _rows = run_search(
                recorder,
                tenant_id=tenant_id,
                model=MODEL,
                q=query,
                query_vector=query.vector,
                summaries=False,  # as the product, for a tenant that never wrote a summary
            )
    return Statement(statements=recorder.executed, plan=statement.plan)


@dataclass
class ClientConfig:
    port: int
    token: str
    tenant: str
    conninfo: dict[str, Any]
    workload: str  # a pickle: per class, bodies, vector literals, statements, candidates file


def _runner(
    config: ClientConfig, work: dict[str, Any], path: str, name: str
) -> Callable[[int], None]:
    """One client's operation for ``path`` and query class ``name``: call(i) runs query i."""
    cls = work[name]
    if path in ("HTTP API", "bare DRF"):
        url = "/api/v1/search" if path == "HTTP API" else BARE_PATH
        headers = {"Content-Type": "application/json"}
        if path == "HTTP API":
            headers["Authorization"] = f"Bearer {config.token}"
            bodies = cls["api_bodies"]
        else:
            bodies = cls["bare_bodies"]
        state: dict[str, Any] = {"conn": None}

        def post(i: int) -> None:
            for attempt in (1, 2):
                if state["conn"] is None:
                    state["conn"] = http.client.HTTPConnection("127.0.0.1", config.port, timeout=60)
                try:
                    state["conn"].request("POST", url, bodies[i % len(bodies)], headers)
                    response = state["conn"].getresponse()
                    response.read()
                except (http.client.HTTPException, OSError):
                    state["conn"].close()
                    state["conn"] = None  # the server closed an idle keep-alive connection
                    if attempt == 2:
                        raise
                    continue
                if response.status != 200:
                    raise RuntimeError(f"{path} answered {response.status}")
                return

        return post
    if path == "raw SQL":
        import psycopg

        conn = psycopg.connect(**config.conninfo, prepare_threshold=None)
        statement: Statement = cls["statement"]
        literals = cls["literals"]
        tenant = config.tenant

        def query(i: int) -> None:
            now = datetime.now(UTC)
            literal = literals[i % len(literals)]
            with conn.transaction():
                conn.execute("SELECT set_config('memoryconsole.tenant_id', %s, true)", [tenant])
                for sql, params in statement.statements:
                    conn.execute(sql, {**params, "vec": literal, "now": now}).fetchall()

        return query
    candidates = np.load(cls["candidates"], mmap_mode="r")
    vectors = cls["vectors"]
    k = min(TOP_K, len(candidates))

    def brute_force(i: int) -> None:
        scores = candidates @ vectors[i % len(vectors)]
        top = np.argpartition(-scores, k - 1)[:k]
        top[np.argsort(-scores[top])]

    return brute_force


def client_process(config: ClientConfig, commands: Connection) -> None:
    """A client in its own process: warm up, report ready, run on "go", send its latencies."""
    with open(config.workload, "rb") as handle:
        work = pickle.load(handle)  # noqa: S301 - written by this benchmark a moment ago
    runners: dict[tuple[str, str], Callable[[int], None]] = {}
    while True:
        message = commands.recv()
        if message is None:
            return
        path, name, count, offset = message
        if (path, name) not in runners:
            runners[(path, name)] = _runner(config, work, path, name)
        run = runners[(path, name)]
        for i in range(5):  # warm-up: connection, caches, plans
            run(offset + i)
        commands.send("ready")
        commands.recv()
        seconds = []
        began = time.perf_counter()
        for i in range(count):
            t0 = time.perf_counter()
            run(offset + 5 + i)
            seconds.append(time.perf_counter() - t0)
        ended = time.perf_counter()
        commands.send((seconds, began, ended))


class ClientPool:
    def __init__(self, size: int, config: ClientConfig) -> None:
        context = multiprocessing.get_context("spawn")
        self.pipes: list[Connection] = []
        self.processes = []
        for _ in range(size):
            parent, child = context.Pipe()
            process = context.Process(target=client_process, args=(config, child), daemon=True)
            process.start()
            self.pipes.append(parent)
            self.processes.append(process)

    def run(self, path: str, name: str, clients: int, per_client: int) -> Timing:
        pipes = self.pipes[:clients]
        for n, pipe in enumerate(pipes):
            pipe.send((path, name, per_client, n * (per_client + 5)))
        for pipe in pipes:
            if pipe.recv() != "ready":
                raise RuntimeError("a client failed to start")
        for pipe in pipes:
            pipe.send("go")
        results = [pipe.recv() for pipe in pipes]
        seconds = [s for r in results for s in r[0]]
        # perf_counter is system-wide monotonic on Linux: comparable across processes.
        wall = max(r[2] for r in results) - min(r[1] for r in results)
        return Timing(f"{path}, {name}, {clients} client(s)", seconds, wall)

    def close(self) -> None:
        for pipe in self.pipes:
            pipe.send(None)
        for process in self.processes:
            process.join(10)


# --- server -------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(workers: int, threads: int) -> tuple[subprocess.Popen[bytes], int]:
    """gunicorn with the project's WSGI app, plus the bare endpoint's benchmark-only route."""
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "memoryconsole.wsgi",
            "-b",
            f"127.0.0.1:{port}",
            "-k",
            "gthread",
            "-w",
            str(workers),
            "--threads",
            str(threads),
            "--keep-alive",
            "60",
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env={
            **os.environ,
            "ALLOWED_HOSTS": "127.0.0.1",
            "DJANGO_SETTINGS_MODULE": "benchmarks.retrieval_search_settings",
        },
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/api/v1/health")
            if conn.getresponse().status == 200:
                return server, port
        except OSError:
            pass  # not listening yet; the deadline below bounds the wait
        if time.monotonic() > deadline:
            os.killpg(server.pid, signal.SIGTERM)
            raise RuntimeError("gunicorn did not become healthy")
        time.sleep(0.3)


def stop_server(server: subprocess.Popen[bytes]) -> None:
    os.killpg(server.pid, signal.SIGTERM)
    try:
        server.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)  # graceful shutdown stuck on idle keep-alives
        server.wait(10)


# --- checks -------------------------------------------------------------------------------------


@dataclass
class Quality:
    name: str
    candidates: int
    plan: str
    queries: int
    recall: float  # over the candidates at or above the relevance floor
    under_returned: int
    foreign: int  # hits that are not the big tenant's live, in-scope records


def check_quality(big: Any, corpus: Corpus, sets: dict[str, QuerySet]) -> list[Quality]:
    """Every query through the product's search function: recall@10 and result counts."""
    from apps.core.actors import Actor
    from apps.retrieval.search import SearchQuery, search_scoped
    from apps.tenancy.context import tenant_scope

    actor = Actor.system("benchmark")
    out = []
    for name, q in sets.items():
        scope = q.scope or {}
        candidates = int(corpus.masks[name].sum())
        found = under = foreign = wanted = 0
        allowed = {corpus.ids[row] for row in np.flatnonzero(corpus.masks[name])}
        plans: set[str] = set()
        started = time.perf_counter()
        for i, vector in enumerate(q.vectors):
            query = SearchQuery(
                vector=[float(x) for x in vector],
                domain=scope.get("domain", ""),
                task_type=scope.get("task_type", ""),
                conditions=scope.get("conditions"),
                top_k=TOP_K,
                # As the timed searches (search_body): the memories hold conditions beyond the
                # scope's, which only the exact match keeps (the contained one found none in
                # the 1 % and 10 % scopes, whose truth is every memory of the scope).
                scope_match="exact" if q.scope is not None else "contained",
            )
            with tenant_scope(big.pk):
                result = search_scoped(tenant=big, q=query, actor=actor)
            got = [h.pk for h in result.hits]
            plans.add(result.plan)
            # k candidates that pass the floor exist: k hits; fewer: all of them.
            under += len(got) < len(q.truth[i])
            wanted += len(q.truth[i])
            foreign += len(set(got) - allowed)
            found += len(set(got) & set(q.truth[i]))
            if (i + 1) % max(1, len(q.vectors) // 4) == 0:
                rate = (i + 1) / (time.perf_counter() - started)
                progress(f"quality {name}: {i + 1}/{len(q.vectors)} ({rate:,.0f} searches/s)")
        out.append(
            Quality(
                name,
                candidates,
                "/".join(sorted(plans)),
                len(q.vectors),
                # No candidate passing the floor: nothing to recall, and none returned
                # (an extra hit would count as foreign or as an under-return elsewhere).
                found / wanted if wanted else 1.0,
                under,
                foreign,
            )
        )
    return out


@dataclass
class Nonsense:
    queries: int
    hits: int
    below_floor: int  # hits whose similarity is under the floor (the target is none)


def check_nonsense(big: Any, count: int, seed: int) -> Nonsense:
    """Queries unrelated to every record (random directions, not from the topic mixture),
    unscoped: every hit they get must still be at or above the relevance floor."""
    from apps.core.actors import Actor
    from apps.retrieval.search import SearchQuery, search_scoped
    from apps.tenancy.context import tenant_scope

    rng = np.random.default_rng(seed + 2)
    floor = relevance_floor()
    hits = below = 0
    for _ in range(count):
        vector = rng.standard_normal(DIM)
        vector /= np.linalg.norm(vector)
        query = SearchQuery(vector=[float(x) for x in vector], top_k=TOP_K)
        with tenant_scope(big.pk):
            result = search_scoped(tenant=big, q=query, actor=Actor.system("benchmark"))
        hits += len(result.hits)
        below += sum(1 for h in result.hits if (h.vector_similarity or 0.0) < floor)
    return Nonsense(count, hits, below)


def explain(conn: Any, tenant_id: uuid.UUID, statement: Statement, literal: str) -> list[str]:
    """The plan of the statement that answers (after the gated one made the HNSW settings)."""
    now = datetime.now(UTC)
    with conn.transaction():
        conn.execute("SELECT set_config('memoryconsole.tenant_id', %s, true)", [str(tenant_id)])
        for sql, params in statement.statements[:-1]:
            conn.execute(sql, {**params, "vec": literal, "now": now}).fetchall()
        sql, params = statement.statements[-1]
        rows = conn.execute(
            "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY ON) " + sql,
            {**params, "vec": literal, "now": now},
        ).fetchall()
    lines = [str(r[0]) for r in rows]
    # The access paths that ran (scans by index or sequential), not the empty branches.
    keep = [
        line.strip()
        for line in lines
        if "Scan" in line and "never executed" not in line and "actual rows=0.00" not in line
    ]
    timing = [line for line in lines if line.startswith(("Planning Time", "Execution Time"))]
    return [lines[0].strip(), *keep[:12], *timing]


def embedding_timings(count: int) -> tuple[Timing, float]:
    """The hashing embedder on query-sized texts, one at a time, and a batch of records."""
    from apps.derivations.embedders import HashingEmbedder

    embedder = HashingEmbedder(DIM)
    texts = [f"billing refund note on topic t{i % 97} for item {i}" for i in range(count)]
    seconds = []
    started = time.perf_counter()
    for text in texts:
        t0 = time.perf_counter()
        embedder.embed([text])
        seconds.append(time.perf_counter() - t0)
    single = Timing("hashing-384, one query text", seconds, time.perf_counter() - started)
    started = time.perf_counter()
    embedder.embed(texts * 5)
    batch_rate = 5 * count / (time.perf_counter() - started)
    return single, batch_rate


# --- main ---------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--tenants", type=int, default=50)
    parser.add_argument("--big-tenant-share", type=float, default=0.2)
    parser.add_argument("--expired-share", type=float, default=0.1)
    parser.add_argument(
        "--queries", type=int, default=10_000, help="searches for recall and under-returns"
    )
    parser.add_argument(
        "--latency-queries", type=int, default=200, help="timed requests per client per cell"
    )
    parser.add_argument("--clients", default="1,8", help="concurrent clients, comma-separated")
    parser.add_argument("--server-workers", type=int, default=4)
    parser.add_argument("--server-threads", type=int, default=2)
    parser.add_argument("--maintenance-work-mem", default="1GB")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--keep", action="store_true", help="keep the benchmark database")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="measure again on the data set a --keep run left, with the same --records, "
        "--tenants, --big-tenant-share and --seed (no load, no index build)",
    )
    args = parser.parse_args()
    client_counts = [int(c) for c in args.clients.split(",")]
    label = f"retrieval_{args.records // 1000}k"

    with (
        bench_database(label, keep=args.keep, reuse=args.reuse),
        tempfile.TemporaryDirectory() as scratch,
    ):
        setup_django()
        import psycopg

        if args.reuse:
            big, token, corpus, mixture, load_timings = load_corpus(args)
        else:
            progress(f"building {args.records:,} records in {args.tenants} tenants ...")
            big, token, corpus, mixture, load_timings = build_corpus(args)
        progress("exact ground truth (numpy) ...")
        sets = query_sets(corpus, mixture, args.queries, args.seed)

        conn = psycopg.connect(**app_conninfo(), prepare_threshold=None)
        statements = {name: product_statement(conn, big.pk, q) for name, q in sets.items()}
        work: dict[str, Any] = {}
        for name, q in sets.items():
            rows = np.flatnonzero(corpus.masks[name])
            candidates_file = Path(scratch) / f"candidates_{name.strip('%')}.npy"
            np.save(candidates_file, corpus.vectors[rows])
            bodies = [search_body(q.scope, v) for v in q.vectors]
            work[name] = {
                "api_bodies": [json.dumps(b) for b in bodies],
                "bare_bodies": [json.dumps({**b, "tenant": str(big.pk)}) for b in bodies],
                "statement": statements[name],
                "candidates": str(candidates_file),
                "vectors": q.vectors,
                # The literal the product builds from the same (rounded) numbers.
                "literals": ["[" + ",".join(repr(x) for x in b["vector"]) + "]" for b in bodies],
            }
        workload = Path(scratch) / "workload.pickle"
        workload.write_bytes(pickle.dumps(work))
        plans = {
            name: explain(conn, big.pk, statements[name], work[name]["literals"][0])
            for name in sets
        }
        conn.close()

        server, port = start_server(args.server_workers, args.server_threads)
        config = ClientConfig(port, token, str(big.pk), app_conninfo(), str(workload))
        pool = ClientPool(max(client_counts), config)
        timings: dict[tuple[str, str, int], Timing] = {}
        try:
            for clients in client_counts:
                for name in SCOPES:
                    for path in PATHS:
                        progress(f"timing {path}, {name}, {clients} client(s) ...")
                        timings[(path, name, clients)] = pool.run(
                            path, name, clients, args.latency_queries
                        )
        finally:
            try:
                pool.close()  # raises when a client died (its pipe is broken) ...
            finally:
                stop_server(server)  # ... and the server must not outlive the run anyway

        report_timings(args, corpus, load_timings, statements, timings, client_counts)
        progress(f"recall and result counts over {args.queries:,} searches ...")
        quality = check_quality(big, corpus, sets)
        nonsense = check_nonsense(big, min(1000, args.queries), args.seed)
        embed_single, embed_rate = embedding_timings(1000)

    report_quality(args, statements, timings, quality, plans, client_counts, nonsense)
    print("\nText embedding, measured apart (these searches send client vectors)\n")
    print(
        table(
            ["embedder", "query p50 ms", "query p95 ms", "batch texts/s"],
            [[embed_single.label, embed_single.p50_ms, embed_single.p95_ms, embed_rate]],
        )
    )


def report_timings(
    args: argparse.Namespace,
    corpus: Corpus,
    load: dict[str, float],
    statements: dict[str, Statement],
    timings: dict[tuple[str, str, int], Timing],
    client_counts: list[int],
) -> None:
    big_count = len(corpus.ids)
    print(
        f"\nData set: {args.records:,} records, {args.tenants} tenants, big tenant "
        f"{big_count:,} ({args.big_tenant_share:.0%}), {args.expired_share:.0%} expired, "
        f"{DIM}-d {MODEL} vectors ({TOPICS} topics)"
    )
    if "read" in load:
        print(f"(reused from an earlier --keep run, read back in {load['read']:.1f} s)")
    else:
        print(
            table(
                ["step", "seconds", "rows/s"],
                [
                    ["tenants + credential", load["tenants"], ""],
                    ["COPY facts, records, embeddings", load["load"], args.records / load["load"]],
                    ["HNSW index build", load["hnsw"], args.records / load["hnsw"]],
                    *(
                        [
                            [
                                f"tenants' own HNSW indexes ({load['tenant_hnsw_count']:.0f}), "
                                f"then their domains' ({load['domain_hnsw_count']:.0f})",
                                load["tenant_hnsw"],
                                "",
                            ]
                        ]
                        if load["tenant_hnsw_rows"]
                        else []
                    ),
                    ["VACUUM (ANALYZE)", load["analyze"], ""],
                ],
            )
        )
    print("\nLatency per query class (top_k 10, vector + scope; embedded PostgreSQL, RLS on)\n")
    rows: list[list[object]] = []
    for clients in client_counts:
        for name in SCOPES:
            bare = timings[("bare DRF", name, clients)]
            raw = timings[("raw SQL", name, clients)]
            for path in PATHS:
                t = timings[(path, name, clients)]
                api = path == "HTTP API"
                rows.append(
                    [
                        name,
                        int(corpus.masks[name].sum()),
                        statements[name].plan,
                        path,
                        clients,
                        t.p50_ms,
                        t.p95_ms,
                        t.percentile(99) * 1000,
                        t.per_second,
                        f"{t.per_second / bare.per_second:.2f}x" if api else "",
                        f"{t.p50_ms / raw.p50_ms:.2f}x" if api else "",
                    ]
                )
    print(
        table(
            [
                "scope",
                "candidates",
                "plan",
                "path",
                "clients",
                "p50 ms",
                "p95 ms",
                "p99 ms",
                "req/s",
                "API/bare req/s",
                "API/SQL p50",
            ],
            rows,
        )
    )
    sys.stdout.flush()  # shown before the long recall run


def report_quality(
    args: argparse.Namespace,
    statements: dict[str, Statement],
    timings: dict[tuple[str, str, int], Timing],
    quality: list[Quality],
    plans: dict[str, list[str]],
    client_counts: list[int],
    nonsense: Nonsense,
) -> None:
    print(
        f"\nRecall@10 against exact search over the candidates at or above the relevance floor "
        f"({relevance_floor():.2f}), and result counts ({args.queries:,} searches)\n"
    )
    print(
        table(
            ["scope", "candidates", "plan", "queries", "recall@10", "target", "under-returned"],
            [
                [
                    q.name,
                    q.candidates,
                    q.plan,
                    q.queries,
                    f"{q.recall:.4f}",
                    "1.0" if q.plan == "exact" else ">= 0.98",
                    q.under_returned,
                ]
                for q in quality
            ],
        )
    )
    print("\nEXPLAIN ANALYZE per query class (plan nodes)")
    for name, lines in plans.items():
        print(f"\n  {name} ({statements[name].plan} path)")
        for line in lines:
            print(f"    {line}")
    print()
    single = min(client_counts)
    for name in ("1%", "100%"):
        print(histogram(timings[("HTTP API", name, single)]))
        print()

    large = args.records >= 1_000_000
    p95_target = 20.0 if large else 5.0
    checks: list[tuple[str, str, bool]] = []
    for name in SCOPES if large else SCOPED:
        t = timings[("HTTP API", name, single)]
        checks.append(
            (
                f"API p95 <= {p95_target:g} ms, {name} scope, {single} client",
                f"{t.p95_ms:.2f} ms",
                t.p95_ms <= p95_target,
            )
        )
    for clients in client_counts:
        for name in SCOPES:
            api = timings[("HTTP API", name, clients)]
            bare = timings[("bare DRF", name, clients)]
            ratio = api.per_second / bare.per_second
            checks.append(
                (
                    f"API >= 0.6x bare DRF req/s, {name}, {clients} client(s)",
                    f"{ratio:.2f}x",
                    ratio >= 0.6,
                )
            )
    for clients in client_counts:
        for name in SCOPES:
            api = timings[("HTTP API", name, clients)]
            raw = timings[("raw SQL", name, clients)]
            ratio = api.p50_ms / raw.p50_ms
            checks.append(
                (
                    f"API p50 <= 1.3x the same SQL bare (issue 38), {name}, {clients} client(s)",
                    f"{ratio:.2f}x ({api.p50_ms:.2f} / {raw.p50_ms:.2f} ms)",
                    ratio <= 1.3,
                )
            )
    for q in quality:
        wanted = 1.0 if q.plan == "exact" else 0.98
        checks.append(
            (
                f"recall@10 {'== 1.0' if wanted == 1.0 else '>= 0.98'}, {name_of(q)}",
                f"{q.recall:.4f}",
                q.recall >= wanted,
            )
        )
    for q in quality:
        # The suite's filtered-recall test checks this on a small corpus; here at full size.
        checks.append((f"recall@10 >= 0.99, {name_of(q)}", f"{q.recall:.4f}", q.recall >= 0.99))
    foreign = sum(q.foreign for q in quality)
    checks.append(
        (
            "no hit from another tenant, out of scope or not live",
            str(foreign),
            foreign == 0,
        )
    )
    under = sum(q.under_returned for q in quality)
    checks.append(
        (
            f"zero under-returns in {sum(q.queries for q in quality):,} searches",
            str(under),
            under == 0,
        )
    )
    share = nonsense.below_floor / max(1, nonsense.hits)
    checks.append(
        (
            f"share of hits below the floor for {nonsense.queries:,} nonsense queries "
            f"({nonsense.hits} hits)",
            f"{share:.4f}",
            nonsense.below_floor == 0,
        )
    )
    print("Targets (issue: Scoped retrieval)")
    for label, measured, ok in checks:
        print(f"  [{'PASS' if ok else 'FAIL'}] {label}: {measured}")


def name_of(q: Quality) -> str:
    return f"{q.name} ({q.plan} path, {q.candidates:,} candidates)"


if __name__ == "__main__":
    main()
