"""The request path: what a write, a search and a delete cost above their own SQL (issue 38).

    .venv/bin/python benchmarks/request_path.py [--records 2000] [--searches 300]
        [--deletes 200] [--parts 100] [--profile] [--top 40] [--change-pairs 0]
        [--delete-pair 0]

On a fresh database of the embedded PostgreSQL (application role, row-level security on):
one tenant whose agents send 384-dimension vectors (``client-384``), ``--records`` writes
through the API, then ``--searches`` searches and ``--deletes`` deletes, each request through
Django's test client (the whole stack but the HTTP server: middleware, authentication,
validation, the service, rendering, commit). Beside each search, alternately, the same
statements the product runs for it, bare through psycopg (a transaction, the tenant's
setting, the statements: what ``benchmarks/retrieval_search.py`` calls raw SQL), and the
API/SQL ratio of their p50s (target: at most 1.3x).

Then ``--parts`` more of each operation with each part of the path timed (wall clock, by
wrapping the function that does it: authentication, body parsing, validation, the service,
rendering, commit, every statement): its time per request and share; for the write, the share
of its own work above the ORM and the database (body, validation, rendering, audit hashing;
target: at most 30 %). Then the records' rendering fast path beside DRF's, and with
``--profile`` the ``--top`` functions of each operation under cProfile.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import importlib
import io
import json
import pstats
import random
import sys
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.harness import Timing, bench_database, measure, setup_django, table

DIM = 384
MODEL = f"client-{DIM}"
DOMAINS = ("commerce", "support", "travel", "billing")


def unit_vector(rng: random.Random) -> list[float]:
    values = [rng.gauss(0.0, 1.0) for _ in range(DIM)]
    norm = sum(v * v for v in values) ** 0.5
    return [round(v / norm, 7) for v in values]


def write_body(n: int, rng: random.Random) -> dict[str, Any]:
    return {
        "key": "shipping.preference",
        "subject": f"user:bench-{n}",
        "value": {"carrier": "carrier_a", "n": n},
        "content": f"ships with carrier a to customer {n}",
        "source": {"kind": "interaction", "ref": f"interaction:bench-{n}", "turn_id": "t1"},
        "observed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "owner": "service:checkout",
        "reason": "applied in checkout flow",
        "scope": {"domain": DOMAINS[n % len(DOMAINS)], "task_type": "checkout"},
        "sensitivity": "personal",
        "retention": {"basis": "contract", "ttl": "P30D"},
        "vector": unit_vector(rng),
    }


def search_body(n: int, rng: random.Random) -> dict[str, Any]:
    return {
        "vector": unit_vector(rng),
        "top_k": 10,
        "scope": {"domain": DOMAINS[n % len(DOMAINS)], "task_type": "checkout"},
        # Random vectors are far from everything: no floor, so every search returns ten
        # hits to render (the path under measurement, not an abstention).
        "min_similarity": 0,
    }


class Api:
    """Django's test client with the agent's credential."""

    def __init__(self, token: str) -> None:
        from django.test import Client

        self.client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")

    def post(self, path: str, body: dict[str, Any], status: int) -> Any:
        response = self.client.post(path, json.dumps(body), content_type="application/json")
        if response.status_code != status:
            raise RuntimeError(f"POST {path}: {response.status_code} {response.content[:500]!r}")
        return response.json()

    def delete(self, path: str) -> Any:
        response = self.client.delete(path)
        if response.status_code != 200:
            raise RuntimeError(f"DELETE {path}: {response.status_code} {response.content[:500]!r}")
        return response.json()


def setup_tenant() -> tuple[Any, str]:
    from apps.core.actors import Actor
    from apps.tenancy.models import Tenant
    from apps.tenancy.services import credential_issue, tenant_create

    tenant = tenant_create(slug="bench", name="Bench", actor=Actor.system("benchmark"))
    Tenant.objects.filter(pk=tenant.pk).update(embedding_model=MODEL)
    tenant.refresh_from_db()
    _credential, token = credential_issue(
        tenant=tenant,
        name="bench",
        actions="read,write,search,delete",
        actor=Actor.system("benchmark"),
    )
    return tenant, token


def raw_search(
    tenant_id: uuid.UUID, bodies: list[dict[str, Any]]
) -> tuple[Callable[[int], None], Any]:
    """The statements the product runs for each search body, bare through psycopg; and the
    connection (closed by the caller: the database is dropped at the end)."""
    import psycopg

    from apps.retrieval.search import SearchQuery, run_search
    from benchmarks.retrieval_search import RecordingCursor, app_conninfo

    conn = psycopg.connect(**app_conninfo(), prepare_threshold=None)
    captured: list[list[tuple[str, Any]]] = []
    for body in bodies:
        scope = body["scope"]
        q = SearchQuery(
            vector=body["vector"],
            domain=scope["domain"],
            task_type=scope["task_type"],
            top_k=body["top_k"],
            min_similarity=body["min_similarity"],
        )
        with conn.transaction():
            conn.execute("SELECT set_config('memoryconsole.tenant_id', %s, true)", [str(tenant_id)])
            recorder = RecordingCursor(conn.cursor())
            run_search(
                recorder,
                tenant_id=tenant_id,
                model=MODEL,
                q=q,
                query_vector=q.vector,
                summaries=False,
            )
        captured.append(recorder.executed)

    def query(i: int) -> None:
        now = datetime.now(UTC)
        with conn.transaction():
            conn.execute("SELECT set_config('memoryconsole.tenant_id', %s, true)", [str(tenant_id)])
            for sql, params in captured[i % len(captured)]:
                conn.execute(sql, {**params, "now": now} if "now" in params else params).fetchall()

    return query, conn


# Parts of a request, timed by wrapping the function that does each (the name looked up where
# it is called: a module attribute, or a class attribute). Wall-clock, so a part's time counts
# its database waits as the request does; nested calls of one part count once.
PARTS: list[tuple[str, str, str]] = [
    (
        "authentication (credential lookup, tenant)",
        "apps.api.access",
        "AgentCredentialAuthentication.authenticate",
    ),
    ("body parsing (JSON, unstorable values)", "apps.api.problems", "JSONBodyParser.parse"),
    ("input validation (serializers)", "apps.api.contract", "validate_input"),
    ("record service (record_write)", "apps.records.services", "record_write"),
    ("  its audit event built and hashed", "apps.records.services", "audit_event"),
    ("  its record digest", "apps.records.services", "record_digest"),
    ("client vector insert", "apps.records.api", "client_vector_store"),
    (
        "record rendering (RecordSerializer)",
        "apps.records.serializers",
        "RecordSerializer.to_representation",
    ),
    ("search service (search_scoped)", "apps.retrieval.api", "search_scoped"),
    ("  search SQL (run_search)", "apps.retrieval.search", "run_search"),
    ("  trust and conflicts of the hits", "apps.retrieval.search", "decision_trust_annotate"),
    ("hit rendering (_hit)", "apps.retrieval.api", "_hit"),
    ("record lookup (record_or_404)", "apps.governance.api", "record_or_404"),
    ("deletion service (record_delete)", "apps.records.purge", "record_delete"),
    ("  deletion statement (versions_purge)", "apps.records.purge", "versions_purge"),
    ("JSON rendering", "apps.api.problems", "JSONRenderer.render"),
    ("commit", "django.db.backends.base.base", "BaseDatabaseWrapper.commit"),
]
# What the write does itself above the ORM and the database (issue 38's target: at most 30 %
# of the request): reading and checking the body, rendering the answer, building and hashing
# the audit event and the record's digest.
OWN_WORK = (
    "body parsing (JSON, unstorable values)",
    "input validation (serializers)",
    "  its audit event built and hashed",
    "  its record digest",
    "record rendering (RecordSerializer)",
    "JSON rendering",
)


class PartTimer:
    """Wall-clock seconds spent in each of :data:`PARTS` and in database statements."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.statements = 0
        self.active = False
        self._undo: list[tuple[Any, str, Any]] = []
        self._depth: dict[str, int] = {}

    def _wrap(self, label: str, function: Callable[..., Any]) -> Callable[..., Any]:
        timer = self

        @functools.wraps(function)
        def timed(*args: Any, **kwargs: Any) -> Any:
            if not timer.active or timer._depth.get(label):
                return function(*args, **kwargs)
            timer._depth[label] = 1
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                timer._depth[label] = 0
                elapsed = time.perf_counter() - started
                timer.seconds[label] = timer.seconds.get(label, 0.0) + elapsed

        return timed

    def install(self) -> None:
        for label, module_name, name in PARTS:
            owner: Any = importlib.import_module(module_name)
            *path, attribute = name.split(".")
            for part in path:
                owner = getattr(owner, part)
            if not hasattr(owner, attribute):
                continue  # not in this version of the code
            original = owner.__dict__.get(attribute, getattr(owner, attribute))
            self._undo.append((owner, attribute, original))
            setattr(owner, attribute, self._wrap(label, getattr(owner, attribute)))

    def uninstall(self) -> None:
        for owner, attribute, original in reversed(self._undo):
            setattr(owner, attribute, original)
        self._undo.clear()

    def statement(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            if self.active:
                self.statements += 1
                label = "every database statement (but COMMIT)"
                self.seconds[label] = self.seconds.get(label, 0.0) + time.perf_counter() - started


def parts(label: str, count: int, operation: Callable[[int], object]) -> float | None:
    """Run ``operation`` ``count`` times with every part timed; print each part's time per
    request and share of the request. Returns the write's own share (None for the others)."""
    from django.db import connection

    timer = PartTimer()
    timer.install()
    try:
        total = 0.0
        with connection.execute_wrapper(timer.statement):
            for i in range(count):
                timer.active = True
                started = time.perf_counter()
                try:
                    operation(i)
                finally:
                    total += time.perf_counter() - started
                    timer.active = False
    finally:
        timer.uninstall()
    rows = [
        [part, f"{seconds / total:.1%}", seconds / count * 1000]
        for part, seconds in timer.seconds.items()
        if seconds
    ]
    order = [p[0] for p in PARTS]
    rows.sort(key=lambda row: order.index(row[0]) if row[0] in order else len(order))
    print(f"\n{label}: {count} requests, {total / count * 1000:.2f} ms each, by part\n")
    print(table(["part", "share", "ms per request"], rows))
    # Exact whatever the load: each is a round trip (psycopg's BEGIN, the request's statement
    # timeout and COMMIT come on top).
    print(f"\n{label}: {timer.statements / count:.1f} statements per request")
    if label != "write":
        return None
    own = sum(timer.seconds.get(part, 0.0) for part in OWN_WORK) / total
    print(
        f"\nwrite's own work (body, validation, rendering, audit hashing): {own:.1%} of the "
        f"request (target <= 30 %)"
    )
    return own


def profile(label: str, count: int, operation: Callable[[int], object], top: int) -> None:
    """The ``top`` functions by cumulative time under cProfile (which slows Python, not the
    database: its shares overstate Python's, hence :func:`parts` for the shares)."""
    profiler = cProfile.Profile()
    profiler.enable()
    for i in range(count):
        operation(i)
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(top)
    print(f"\n{label} under cProfile\n")
    print("\n".join(out.getvalue().splitlines()[4:]))


def interleaved(
    count: int, api: Callable[[int], object], raw: Callable[[int], object]
) -> tuple[Timing, Timing]:
    """The API and the bare SQL, alternately: on a shared machine both see the same load."""
    api_seconds: list[float] = []
    raw_seconds: list[float] = []
    started = time.perf_counter()
    for i in range(count):
        for operation, seconds in ((api, api_seconds), (raw, raw_seconds)):
            t0 = time.perf_counter()
            operation(i)
            seconds.append(time.perf_counter() - t0)
    wall = (time.perf_counter() - started) / 2
    return Timing("search", api_seconds, wall), Timing("search SQL bare", raw_seconds, wall)


def plain_delete_path() -> Callable[[], None]:
    """Make a record's deletion plain until the returned function is called: its receipt and
    ledger entry saved through the ORM (``Model.save``, one statement each), then its audit
    event's statement, instead of both rows in that statement
    (``apps.core.database.insert_clause``)."""
    from apps.records import purge

    real_insert, real_append = purge.insert_clause, purge.audit_append

    def insert(instance: Any) -> tuple[str, Any]:
        return ("save", instance)

    def append(event: Any, *, alongside: Any = (), **kwargs: Any) -> Any:
        rest = []
        for sql, params in alongside:
            if sql == "save":
                params.save(force_insert=True)
            else:
                rest.append((sql, params))
        return real_append(event, alongside=rest, **kwargs)

    purge.insert_clause, purge.audit_append = insert, append  # type: ignore[assignment]

    def undo() -> None:
        purge.insert_clause, purge.audit_append = real_insert, real_append

    return undo


def delete_pair(count: int, delete: Callable[[int], object]) -> None:
    """Deletes with their receipt and ledger entry in the audit event's statement and with
    both saved apart, alternately (one interleaved pair: both see the same load); each
    request timed whole, and the part the fast path replaces (from the receipt's insert to
    the audit event's) timed apart."""
    from apps.records import purge

    if not hasattr(purge, "insert_clause"):
        return  # a version of the code without the fast path
    requests: dict[str, list[float]] = {"one statement": [], "ORM": []}
    part: dict[str, list[float]] = {"one statement": [], "ORM": []}
    for i in range(count):
        for label in ("one statement", "ORM"):
            undo = plain_delete_path() if label == "ORM" else (lambda: None)
            inner = purge.audit_append
            spent: list[float] = []

            def timed(
                event: Any,
                *,
                alongside: Any = (),
                _inner: Any = inner,
                _spent: Any = spent,
                **kw: Any,
            ) -> Any:
                # The plain path's saves run inside its append, so both sides time the same
                # work: the receipt, the ledger entry and the audit event.
                t = time.perf_counter()
                try:
                    return _inner(event, alongside=alongside, **kw)
                finally:
                    _spent.append(time.perf_counter() - t)

            purge.audit_append = timed  # type: ignore[assignment]
            try:
                t0 = time.perf_counter()
                delete(i)
                requests[label].append(time.perf_counter() - t0)
            finally:
                purge.audit_append = inner  # type: ignore[assignment]
                undo()
            part[label].append(sum(spent))
    fast = Timing("one", requests["one statement"], sum(requests["one statement"]))
    plain = Timing("orm", requests["ORM"], sum(requests["ORM"]))
    fast_part = Timing("one", part["one statement"], sum(part["one statement"]))
    plain_part = Timing("orm", part["ORM"], sum(part["ORM"]))
    print(
        f"\ndelete pair ({count} each, interleaved): receipt, ledger entry and audit event "
        f"in one statement p50 {fast_part.p50_ms:.2f} ms, saved apart {plain_part.p50_ms:.2f} "
        f"ms: {plain_part.p50_ms / fast_part.p50_ms:.2f}x (a fast path must show >= 1.5x); "
        f"the whole delete {fast.p50_ms:.2f} against {plain.p50_ms:.2f} ms: "
        f"{plain.p50_ms / fast.p50_ms:.2f}x"
    )


def _old_statement_timeout(
    execute: Callable[..., Any], sql: str, params: Any, many: bool, context: dict[str, Any]
) -> Any:
    """The statement timeout as its own statement, ahead of the transaction's first."""
    from django.conf import settings
    from psycopg.pq import TransactionStatus

    database = context["connection"]
    raw = database.connection
    if (
        database.in_atomic_block
        and raw is not None
        and raw.info.transaction_status == TransactionStatus.IDLE
    ):
        raw.execute(
            "SELECT set_config('statement_timeout', %s, true)",
            [f"{int(settings.REQUEST_STATEMENT_TIMEOUT * 1000)}ms"],
        )
    return execute(sql, params, many, context)


def change_pairs(count: int, token: str, search: Callable[[int], object]) -> None:
    """Each of this round's request-path changes against its former self, in one process,
    alternately (a pair sees the same load): ``count`` searches each way, p50s and ratio."""
    try:
        from apps.api import contract, middleware
    except ImportError:
        return
    if not hasattr(contract, "_built_once"):
        return  # a version of the code without them
    from django.conf import settings
    from django.test.utils import override_settings
    from django.utils.module_loading import import_string

    def pair(label: str, new: Callable[[int], object], old: Callable[[int], object]) -> None:
        a: list[float] = []
        b: list[float] = []
        for i in range(count):
            for operation, seconds in ((new, a), (old, b)):
                t0 = time.perf_counter()
                operation(i)
                seconds.append(time.perf_counter() - t0)
        after, before = Timing(label, a, sum(a)), Timing(label, b, sum(b))
        print(
            f"{label}: before p50 {before.p50_ms:.2f} ms, after {after.p50_ms:.2f} ms "
            f"({before.p50_ms / after.p50_ms:.2f}x; {count} searches each, alternately)"
        )

    print()

    # Since taken out again (docs/performance.md): measured where the code has it.
    console_only = getattr(middleware, "ConsoleOnly", None)
    if console_only is not None:
        # The console's middleware as it was: Django's own classes (each ConsoleOnly's other
        # base), for every request.
        def former_class(path: str) -> str:
            cls = import_string(path)
            if not issubclass(cls, console_only):
                return path
            base = cls.__bases__[1]
            return f"{base.__module__}.{base.__qualname__}"

        with override_settings(MIDDLEWARE=[former_class(m) for m in settings.MIDDLEWARE]):
            former = Api(token)
            search_body_ = search_body(0, random.Random(0))  # noqa: S311 - test data
            former.post("/api/v1/search", search_body_, 200)  # its middleware loaded here
        current = Api(token)
        current.post("/api/v1/search", search_body_, 200)
        pair(
            "API request through the console's middleware",
            lambda i: current.post("/api/v1/search", search_body_, 200),
            lambda i: former.post("/api/v1/search", search_body_, 200),
        )

    def with_old_timeout(i: int) -> None:
        folded = middleware._statement_timeout_set
        middleware._statement_timeout_set = _old_statement_timeout
        try:
            search(i)
        finally:
            middleware._statement_timeout_set = folded

    pair("statement timeout, its own round trip", search, with_old_timeout)

    built_once = contract._built_once

    def per_request(serializer_class: Any) -> Any:
        return serializer_class(context=contract._InputContext())

    def with_serializers_per_request(i: int) -> None:
        contract._built_once = per_request
        try:
            search(i)
        finally:
            contract._built_once = built_once

    pair("input serializers built per request", search, with_serializers_per_request)


def rendering_ratio(tenant_id: uuid.UUID, rounds: int = 200) -> None:
    """The records' one fast path (``record_representation``, behind ``RecordSerializer``)
    beside DRF's own rendering of the same declared fields, on ten records."""
    try:
        from apps.records.serializers import RecordSerializer, record_representation
    except ImportError:
        return  # an earlier version of the code, without it
    from rest_framework import serializers

    from apps.records.models import MemoryRecord
    from apps.tenancy.context import tenant_scope

    with tenant_scope(tenant_id):
        records = list(MemoryRecord.objects.all()[:10])
    fast = drf = 0.0
    for _ in range(rounds):
        t0 = time.perf_counter()
        for record in records:
            record_representation(record)
        t1 = time.perf_counter()
        serializer = RecordSerializer()
        for record in records:
            serializers.Serializer.to_representation(serializer, record)
        t2 = time.perf_counter()
        fast, drf = fast + t1 - t0, drf + t2 - t1
    print(
        f"\nrendering ten records: DRF's declared fields {drf / rounds * 1000:.3f} ms, "
        f"record_representation {fast / rounds * 1000:.3f} ms ({drf / fast:.1f}x; a fast path "
        f"must show >= 1.5x)"
    )


def conflicts_ratio(tenant_id: uuid.UUID, rounds: int = 200) -> None:
    """The open-conflicts lookup of a search's ten hits: the statement behind
    ``open_conflicts_of`` beside the queryset it replaced (each run, none found)."""
    try:
        from apps.records.trust import OPEN_CONFLICTS_SQL  # noqa: F401 (only to know it is there)
    except ImportError:
        return  # an earlier version of the code, without it
    from django.db.models import Q

    from apps.records.models import Conflict, ConflictState, MemoryRecord
    from apps.records.trust import open_conflicts_of
    from apps.tenancy.context import tenant_scope

    with tenant_scope(tenant_id):
        ids = list(MemoryRecord.objects.values_list("pk", flat=True)[:10])
        fast = orm = 0.0
        for _ in range(rounds):
            t0 = time.perf_counter()
            open_conflicts_of(ids)
            t1 = time.perf_counter()
            list(
                Conflict.objects.filter(state=ConflictState.OPEN)
                .filter(Q(current_record_id__in=ids) | Q(contender_id__in=ids))
                .order_by("opened_at", "id")
                .values_list("pk", "current_record_id", "contender_id")
            )
            t2 = time.perf_counter()
            fast, orm = fast + t1 - t0, orm + t2 - t1
    print(
        f"open conflicts of ten hits: the queryset {orm / rounds * 1000:.3f} ms, the statement "
        f"{fast / rounds * 1000:.3f} ms ({orm / fast:.1f}x; a fast path must show >= 1.5x)"
    )


def explain_deletion(tenant_id: uuid.UUID) -> None:
    """EXPLAIN ANALYZE of the generated deletion statement for one fact, as deletion runs it:
    prepared, planned generically (``apps.tenancy.context``), in a transaction rolled back."""
    import re

    import psycopg
    from django.utils import timezone

    from apps.core import deletion
    from apps.records.models import MemoryRecord
    from apps.tenancy.context import tenant_scope
    from benchmarks.retrieval_search import app_conninfo

    with tenant_scope(tenant_id):
        records = list(MemoryRecord.objects.filter(is_current=True)[:2])
    labels = ("records.MemoryRecord", "records.Fact")
    statement = deletion.statement_for(labels)
    names: list[str] = []

    def numbered(match: re.Match[str]) -> str:
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    sql = re.sub(r"%\((\w+)\)s", numbered, statement.sql).replace("%%", "%")
    with psycopg.connect(**app_conninfo()) as conn, conn.transaction(force_rollback=True):
        conn.execute("SELECT set_config('memoryconsole.tenant_id', %s, true)", [str(tenant_id)])
        conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        conn.execute("PREPARE deletion AS " + sql)
        # The first execution plans (once per connection); the second, another fact's,
        # reuses the plan, as every later delete on the connection does.
        for run, record in zip(("planned", "plan reused"), records, strict=True):
            params = statement.params(
                deleted={labels[0]: [record.pk], labels[1]: [record.fact_id]},
                withdrawn=None,
                now=timezone.now(),
                reason="benchmark",
            )
            values = ", ".join(psycopg.sql.Literal(str(params[n])).as_string() for n in names)
            rows = conn.execute(f"EXPLAIN (ANALYZE, BUFFERS) EXECUTE deletion({values})")
            lines = [str(row[0]) for row in rows.fetchall()]
            scans = [line for line in lines if "Scan on" in line and "never executed" not in line]
            timing = [
                line for line in lines if line.startswith(("Planning Time", "Execution Time"))
            ]
            sequential = sum("Seq Scan" in line for line in scans)
            print(
                f"deletion statement, {run}: {'; '.join(timing)}; {len(scans)} scans run, "
                f"{sequential} sequential"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--searches", type=int, default=300)
    parser.add_argument("--deletes", type=int, default=200)
    parser.add_argument(
        "--parts", type=int, default=100, help="requests per operation timed by part"
    )
    parser.add_argument("--profile", action="store_true", help="and under cProfile")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--change-pairs",
        type=int,
        default=0,
        help="then this many searches with each of the round's changes and without",
    )
    parser.add_argument(
        "--delete-pair",
        type=int,
        default=0,
        help="then this many deletes with the receipt and ledger entry in the audit event's "
        "statement and as many with them saved apart",
    )
    args = parser.parse_args()
    rng = random.Random(args.seed)  # noqa: S311 - test data

    with bench_database("request_path"):
        setup_django()
        from django.conf import settings

        settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
        tenant, token = setup_tenant()
        api = Api(token)
        ids: list[str] = []

        def write(i: int) -> None:
            ids.append(api.post("/api/v1/records", write_body(i, rng), 201)["id"])

        writes = measure("write", args.records, write)
        bodies = [search_body(i, rng) for i in range(args.searches)]
        for body in bodies[:20]:  # plans cached, as a running server has them
            api.post("/api/v1/search", body, 200)

        def search(i: int) -> None:
            answer = api.post("/api/v1/search", bodies[i % len(bodies)], 200)
            if len(answer["results"]) != 10:
                raise RuntimeError(f"search {i}: {len(answer['results'])} hits")

        raw, raw_conn = raw_search(tenant.pk, bodies)
        try:  # closed before the database is dropped, whatever happens
            raw(0)
            searches, raw_sql = interleaved(args.searches, search, raw)
        finally:
            raw_conn.close()
        extra = args.parts * (2 if args.profile else 1) + 2 * args.delete_pair
        deleted = iter(rng.sample(ids, min(len(ids), args.deletes + extra)))

        def delete(_i: int) -> None:
            api.delete(f"/api/v1/records/{next(deleted)}")

        deletes = measure("delete", args.deletes, delete)

        rows = [
            [t.label, t.count, t.p50_ms, t.p95_ms, t.per_second]
            for t in (writes, searches, raw_sql, deletes)
        ]
        print(f"\nRequest path through Django's test client ({args.records:,} records)\n")
        print(table(["operation", "count", "p50 ms", "p95 ms", "per s"], rows))
        ratio = searches.p50_ms / raw_sql.p50_ms
        print(
            f"\n[{'PASS' if ratio <= 1.3 else 'FAIL'}] search API p50 / the same SQL bare p50: "
            f"{ratio:.2f}x (target <= 1.3x)"
        )
        sys.stdout.flush()

        def another_write(i: int) -> None:
            api.post("/api/v1/records", write_body(args.records + i, rng), 201)

        own = parts("write", args.parts, another_write)
        parts("search", args.parts, search)
        parts("delete", args.parts, delete)
        if own is not None:
            print(f"\n[{'PASS' if own <= 0.3 else 'FAIL'}] write's own share: {own:.1%}")
        if args.change_pairs:
            change_pairs(args.change_pairs, token, search)
        if args.delete_pair:
            delete_pair(args.delete_pair, delete)
        rendering_ratio(tenant.pk)
        conflicts_ratio(tenant.pk)
        explain_deletion(tenant.pk)
        if args.profile:
            profile("write", args.parts, lambda i: another_write(args.parts + i), args.top)
            profile("search", args.parts, search, args.top)
            profile("delete", args.parts, delete, args.top)


if __name__ == "__main__":
    main()
