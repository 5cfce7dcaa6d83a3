"""Peers: Memory Console beside LangGraph's PostgresStore and mem0 OSS on the same vectors.

    .venv/bin/python benchmarks/peers.py [--records 20000] [--tenants 20] [--queries 1000]
        [--rounds 4] [--writes 100] [--skip mem0,langgraph-flat] [--json OUT]

Generates ``--records`` 384-dimension unit vectors (a mixture of gaussians: topics of uneven
size, as benchmarks/retrieval_search.py draws them) spread evenly over ``--tenants`` tenants, a
tenth of each tenant's records in the domain ``billing``; ``--queries`` query vectors from the
same mixture, each in one tenant, every second one also filtered to ``billing``. Every system
stores and is asked the very same vectors:

- **Memory Console**: its HTTP API (gunicorn on loopback, the product's gunicorn settings and
  ``up``'s two workers) on a freshly migrated ``bench_peers`` database of the embedded
  PostgreSQL; one ``client-384`` tenant per tenant and an agent credential each; a record is a
  ``POST /api/v1/records`` with every governance member (source, owner, reason, scope,
  sensitivity, retention) and its ``vector``; a search sends the ``vector``, ``top_k`` 10,
  ``min_similarity`` 0 (no relevance floor, as the peers have none) and the scope's domain
  when filtered; a delete is ``DELETE /api/v1/records/{id}``.
- **LangGraph** ``PostgresStore`` (``langgraph-checkpoint-postgres``) twice: with its default
  HNSW index (``langgraph-hnsw``) and with no ANN index (``langgraph-flat``, exact scans), an
  index config whose embed function returns the precomputed vector of an item's text, a
  namespace per tenant and the domain in the item's value (``filter``); ``put``, ``search``,
  ``delete``.
- **mem0 OSS** (``mem0ai``): ``Memory`` on its pgvector store (HNSW, its default), an embedder
  that returns the precomputed vector, ``user_id`` per tenant, the domain as metadata;
  ``add(..., infer=False)`` (no LLM), ``search(filters=..., threshold=0)``, ``delete``.

The peers are installed by this script into venvs of their own (``--venv-dir``, default
``var/bench-venvs/``; pinned versions, installed once) and each system runs as a subprocess
(``benchmarks/peers_driver.py``) answering JSON lines, so no peer package enters the product's
environment. The peers' databases (one each) live on the same embedded PostgreSQL server as
Memory Console's, with the same pgvector.

Each system is loaded by its own bulk path where it has one (LangGraph: ``batch`` of 500 puts;
mem0: ``add`` calls of up to 200 messages, two clients; Memory Console: single writes, two
clients), all systems at once (loading is not compared), then measured in ``--rounds``
interleaved rounds: in each, every system answers its share of the queries, then writes
``--writes`` new records one at a time, then deletes them (so every round searches the same
corpus), the systems' order rotating from round to round; one client, one call at a time, each
call timed in the driver around the system's own client call. Recall@10 is scored against the
exact top 10 (cosine, numpy) of the query's tenant within its filter, counting records at or
above cosine 0, the floor Memory Console is asked for (``min_similarity``; a peer's extra hits
under it cost it nothing); a *short* answer has fewer hits than that exact top 10. Prints one
table with Memory Console's ratio to each peer, and the load average at the start and at the
end (the machine may be shared: compare within a run).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.harness import ROOT, Timing, bench_database, progress, setup_django, table
from benchmarks.peers_driver import MIN_SIMILARITY, TOP_K

DIM = 384
MODEL = "client-384"
TOPICS = 256
NOISE = 0.6  # per-coordinate noise beside unit-variance topic centres: cosine ~0.7 in a topic
DRIVER = Path(__file__).resolve().with_name("peers_driver.py")
# Pinned so that a number is always of a known version; raise them deliberately.
VENVS = {
    "langgraph": [
        "langgraph==1.2.24",
        "langgraph-checkpoint-postgres==3.2.0",
        "psycopg[binary]==3.3.9",
        "psycopg-pool==3.3.3",
        "numpy==2.4.6",
    ],
    "mem0": ["mem0ai==2.2.1", "psycopg[binary]==3.3.9", "psycopg-pool==3.3.3", "numpy==2.4.6"],
}
SYSTEMS = {  # system -> (label, venv; None: the product's own Python)
    "memoryconsole": ("Memory Console", None),
    "langgraph-hnsw": ("LangGraph HNSW", "langgraph"),
    "langgraph-flat": ("LangGraph flat", "langgraph"),
    "mem0": ("mem0", "mem0"),
}
PEERS = [name for name in SYSTEMS if name != "memoryconsole"]


# --- data: the same vectors for every system --------------------------------------------------


def generate(
    records: int, extra: int, tenants: int, queries: int, seed: int
) -> dict[str, np.ndarray]:
    """``records`` vectors to load and ``extra`` more to write (and delete) in the rounds, their
    tenants (an even split, shuffled) and domains (every tenth record of each tenant by a
    shuffled rank is ``billing``, domain 0), and ``queries`` query vectors with a tenant each,
    every second one filtered to ``billing``. The same arguments give the same arrays."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(TOPICS, DIM)).astype(np.float32)
    weights = 1.0 / np.arange(1, TOPICS + 1) ** 0.8
    weights /= weights.sum()

    def sample(count: int) -> np.ndarray:
        topics = rng.choice(TOPICS, size=count, p=weights)
        vectors = centers[topics] + NOISE * rng.normal(size=(count, DIM)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors.astype(np.float32)

    total = records + extra
    vectors = sample(total)
    tenant = rng.permutation(np.arange(total) % tenants).astype(np.int32)
    domain = np.zeros(total, dtype=np.int32)
    for t in range(tenants):
        # A record's rank in its tenant picks its domain: the shares are exact per tenant.
        for part in (slice(0, records), slice(records, total)):
            rows = np.flatnonzero(tenant[part] == t) + (part.start or 0)
            ranks = rng.permutation(len(rows))
            domain[rows] = np.where(ranks % 10 == 0, 0, 1 + ranks % 9)
    return {
        "vectors": vectors,
        "tenant": tenant,
        "domain": domain,
        "queries": sample(queries),
        "query_tenant": rng.integers(0, tenants, size=queries).astype(np.int32),
        "query_filtered": np.arange(queries) % 2 == 1,
    }


def exact_top_k(
    data: dict[str, np.ndarray], records: int, k: int = TOP_K, floor: float = MIN_SIMILARITY
) -> list[list[int]]:
    """Per query, the record numbers (of the first ``records``) of its tenant and filter
    nearest by cosine, at most ``k`` and none under ``floor``, best first: the ranking a
    search should return."""
    vectors = data["vectors"][:records].astype(np.float64)
    tenant, domain = data["tenant"][:records], data["domain"][:records]
    truth = []
    for q, vector in enumerate(data["queries"].astype(np.float64)):
        mask = tenant == data["query_tenant"][q]
        if data["query_filtered"][q]:
            mask &= domain == 0
        rows = np.flatnonzero(mask)
        scores = vectors[rows] @ vector  # unit vectors: the cosine
        rows, scores = rows[scores >= floor], scores[scores >= floor]
        best = np.argsort(-scores, kind="stable")[:k]
        truth.append([int(rows[i]) for i in best])
    return truth


@dataclass
class Quality:
    recall: float  # mean over queries of |hits ∩ exact| / |exact|
    short: int  # answers with fewer hits than exist (at most k)
    queries: int


def quality(hits: list[list[int]], truth: list[list[int]]) -> Quality:
    if not truth:
        return Quality(1.0, 0, 0)
    recall = short = 0.0
    for got, wanted in zip(hits, truth, strict=True):
        recall += len(set(got) & set(wanted)) / len(wanted) if wanted else 1.0
        short += len(got) < len(wanted)
    return Quality(recall / len(truth), int(short), len(truth))


# --- the peers' venvs ---------------------------------------------------------------------------


def ensure_venv(root: Path, name: str) -> Path:
    """The venv ``root/name`` with ``VENVS[name]`` installed (once; again when the pins
    change); its Python."""
    venv = root / name
    python = venv / "bin" / "python"
    wanted = "\n".join(VENVS[name]) + "\n"
    marker = venv / "peers-requirements.txt"
    if python.exists() and marker.exists() and marker.read_text() == wanted:
        return python
    progress(f"installing the {name} venv in {venv} (pip, about a minute) ...")
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    log_path = venv / "install.log"
    with log_path.open("w") as log:
        done = subprocess.run(
            [str(python), "-m", "pip", "install", "--disable-pip-version-check", *VENVS[name]],
            stdout=log,
            stderr=subprocess.STDOUT,
            check=False,
        )
    if done.returncode != 0:
        sys.exit(f"pip could not install the {name} venv: see {log_path}")
    marker.write_text(wanted)
    progress(f"{name} venv ready in {time.perf_counter() - started:.0f}s")
    return python


# --- the drivers ----------------------------------------------------------------------------------


@dataclass
class Driver:
    name: str
    process: subprocess.Popen[str]
    search: list[float] = field(default_factory=list)
    filtered: list[bool] = field(default_factory=list)
    hits: list[list[int]] = field(default_factory=list)
    writes: list[float] = field(default_factory=list)
    deletes: list[float] = field(default_factory=list)
    floor: list[float] = field(default_factory=list)  # Memory Console's request without work
    transport: list[float] = field(default_factory=list)  # the same server without Django
    framework: list[float] = field(default_factory=list)  # refused before the database
    rounds: list[dict[str, float]] = field(default_factory=list)  # p50 ms per round and op
    load_seconds: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return SYSTEMS[self.name][0]

    def read(self) -> dict[str, Any]:
        stdout: IO[str] | None = self.process.stdout
        assert stdout is not None
        line = stdout.readline()
        if not line:
            raise SystemExit(f"{self.name}: the driver ended (exit {self.process.wait()})")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def write_command(self, command: dict[str, Any]) -> None:
        stdin = self.process.stdin
        assert stdin is not None
        stdin.write(json.dumps(command) + "\n")
        stdin.flush()

    def send(self, command: dict[str, Any]) -> dict[str, Any]:
        self.write_command(command)
        return self.read()


@contextmanager
def driver(name: str, python: Path, data_path: Path, config: dict[str, Any]) -> Iterator[Driver]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "DJANGO"))}
    if name != "memoryconsole":
        # A peer's own venv only: none of the product's modules or settings.
        env.pop("MEMORYCONSOLE_DATABASE_NAME", None)
    env.update({"MEM0_TELEMETRY": "False", "PYTHONUNBUFFERED": "1"})
    if "mem0_dir" in config:
        env["MEM0_DIR"] = config["mem0_dir"]
    process = subprocess.Popen(
        [str(python), str(DRIVER), name, "--data", str(data_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    running = Driver(name, process)
    try:
        running.write_command(config)  # on stdin: the tokens stay out of the process list
        running.read()  # ready
        running.info = running.send({"op": "info"})
        yield running
    finally:
        # The end of its stdin ends an idle driver; one still busy (an interrupted run) is
        # stopped. A driver that ended on its own has said why on stderr.
        with suppress(BrokenPipeError):
            assert process.stdin is not None
            process.stdin.close()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


# --- Memory Console and the peers' databases ---------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def product_tenants(tenants: int) -> list[str]:
    """``tenants`` client-384 tenants, each with an agent credential that may read, write,
    search and delete; their tokens, by tenant number."""
    from apps.core.actors import Actor
    from apps.tenancy.context import tenant_scope
    from apps.tenancy.services import credential_issue, tenant_create

    actor = Actor.system("benchmark")
    tokens = []
    for t in range(tenants):
        tenant = tenant_create(slug=f"peers-t{t:02d}", name=f"Peers {t}", actor=actor)
        tenant.embedding_model = MODEL  # a tenant setting, chosen before any write
        tenant.save(update_fields=["embedding_model"])
        with tenant_scope(tenant.pk):
            _credential, token = credential_issue(
                tenant=tenant, name="bench", actions="read,write,search,delete", actor=actor
            )
        tokens.append(token)
    return tokens


@contextmanager
def gunicorn(workers: int, log_path: Path, app: str = "memoryconsole.wsgi") -> Iterator[int]:
    """The product's web server as ``up`` starts it (its gunicorn settings), on loopback;
    with ``app``, the same server around another WSGI application."""
    from benchmarks.harness import wait_healthy

    port = free_port()
    env = {**os.environ, "ALLOWED_HOSTS": "127.0.0.1"}
    env.pop("CELERY_BROKER_URL", None)
    with log_path.open("ab") as log:
        server = subprocess.Popen(
            [
                *(sys.executable, "-m", "gunicorn", app),
                *("--bind", f"127.0.0.1:{port}", "--workers", str(workers)),
                *("--config", "python:memoryconsole.gunicorn_conf", "--no-control-socket"),
                *("--log-level", "warning", "--access-logfile", "/dev/null"),
            ],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_healthy(port, timeout=120)
        yield port
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(30)


@contextmanager
def peer_database(name: str) -> Iterator[str]:
    """A database of its own for one peer, on the embedded server (pgvector comes from its
    template); its connection string, as the owner role over the server's socket."""
    import psycopg
    from psycopg import sql

    from memoryconsole import embedded, instance

    socket_dir = embedded.socket_dir(instance.home())
    dbname = f"bench_peers_{name.replace('-', '_')}"

    def conninfo(database: str) -> str:
        return psycopg.conninfo.make_conninfo(
            host=str(socket_dir), user=embedded.OWNER_ROLE, dbname=database
        )

    def drop() -> None:
        with psycopg.connect(conninfo(embedded.DATABASE_NAME), autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(dbname))
            )

    drop()
    with psycopg.connect(conninfo(embedded.DATABASE_NAME), autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))
    try:
        yield conninfo(dbname)
    finally:
        drop()


# --- the run -----------------------------------------------------------------------------------


def p50_ms(seconds: list[float]) -> float:
    return Timing("", seconds, sum(seconds)).p50_ms if seconds else float("nan")


def run_rounds(drivers: list[Driver], args: argparse.Namespace, records: int) -> None:
    per_round = -(-args.queries // args.rounds)
    for r in range(args.rounds):
        # The systems' order rotates, so none is always measured first or last in a round.
        order = drivers[r % len(drivers) :] + drivers[: r % len(drivers)]
        queries = list(range(r * per_round, min(args.queries, (r + 1) * per_round)))
        pool = list(range(records + r * args.writes, records + (r + 1) * args.writes))
        progress(
            f"round {r + 1}/{args.rounds}: {len(queries)} searches, {len(pool)} writes and "
            f"deletes each, order {', '.join(d.name for d in order)}"
        )
        per: dict[str, dict[str, float]] = {d.name: {} for d in drivers}
        for d in order:
            answer = d.send({"op": "search", "queries": queries})
            d.search += answer["seconds"]
            d.hits += answer["hits"]
            per[d.name]["search"] = p50_ms(answer["seconds"])
        for op in ("write", "delete"):
            for d in order:
                seconds = d.send({"op": op, "records": pool})["seconds"]
                (d.writes if op == "write" else d.deletes).extend(seconds)
                per[d.name][op] = p50_ms(seconds)
        for d in order:
            if d.name == "memoryconsole":
                d.floor += d.send({"op": "floor", "records": pool})["seconds"]
                d.transport += d.send({"op": "transport", "records": pool})["seconds"]
                d.framework += d.send({"op": "framework", "records": pool})["seconds"]
        for d in drivers:
            d.rounds.append(per[d.name])
            progress(
                f"  {d.name}: search p50 {per[d.name]['search']:.2f} ms, write p50 "
                f"{per[d.name]['write']:.2f} ms, delete p50 {per[d.name]['delete']:.2f} ms"
            )


def summary(d: Driver, data: dict[str, np.ndarray], truth: list[list[int]]) -> dict[str, Any]:
    filtered = data["query_filtered"][: len(d.hits)]
    out: dict[str, Any] = {"system": d.label, "info": d.info, "load_s": d.load_seconds}
    for name, wanted in (("tenant", False), ("tenant+domain", True)):
        rows = [i for i in range(len(d.hits)) if bool(filtered[i]) == wanted]
        q = quality([d.hits[i] for i in rows], [truth[i] for i in rows])
        out[name] = {
            "queries": q.queries,
            "search_p50_ms": p50_ms([d.search[i] for i in rows]),
            "search_p95_ms": Timing("", [d.search[i] for i in rows], 1).p95_ms if rows else 0,
            "recall_at_10": q.recall,
            "short": q.short,
        }
    out["writes"] = len(d.writes)
    out["writes_per_s"] = len(d.writes) / sum(d.writes) if d.writes else float("nan")
    out["write_p50_ms"] = p50_ms(d.writes)
    out["delete_p50_ms"] = p50_ms(d.deletes)
    if d.floor:
        out["floor_p50_ms"] = p50_ms(d.floor)
    if d.transport:
        out["transport_p50_ms"] = p50_ms(d.transport)
    if d.framework:
        out["framework_p50_ms"] = p50_ms(d.framework)
    out["rounds"] = d.rounds
    return out


def report(results: dict[str, dict[str, Any]]) -> str:
    names = list(results)
    peers = [n for n in names if n != "memoryconsole"]
    ours = results["memoryconsole"]

    def row(label: str, get: Any, fmt: str = "{:,.2f}", ratio: bool = True) -> list[object]:
        values = [get(results[n]) for n in names]
        cells: list[object] = [label, *(fmt.format(v) for v in values)]
        for p in peers:
            theirs = get(results[p])
            cells.append(f"{get(ours) / theirs:.2f}x" if ratio and theirs else "")
        return cells

    rows = [
        row("search p50 ms, tenant", lambda r: r["tenant"]["search_p50_ms"]),
        row("search p50 ms, tenant + domain", lambda r: r["tenant+domain"]["search_p50_ms"]),
        row("search p95 ms, tenant", lambda r: r["tenant"]["search_p95_ms"]),
        row("search p95 ms, tenant + domain", lambda r: r["tenant+domain"]["search_p95_ms"]),
        row("recall@10, tenant", lambda r: r["tenant"]["recall_at_10"], "{:.3f}"),
        row("recall@10, tenant + domain", lambda r: r["tenant+domain"]["recall_at_10"], "{:.3f}"),
        row(
            "short answers, tenant",
            lambda r: r["tenant"]["short"],
            "{:,}",
            ratio=False,
        ),
        row(
            "short answers, tenant + domain",
            lambda r: r["tenant+domain"]["short"],
            "{:,}",
            ratio=False,
        ),
        row("writes/s (one client)", lambda r: r["writes_per_s"]),
        row("write p50 ms", lambda r: r["write_p50_ms"]),
        row("delete p50 ms", lambda r: r["delete_p50_ms"]),
    ]
    headers = [
        "",
        *(results[n]["system"] for n in names),
        *(f"MC / {results[p]['system']}" for p in peers),
    ]
    return table(headers, rows)


def floor_report(results: dict[str, dict[str, Any]]) -> str:
    """Memory Console's own request floor beside each operation and the peers' in-process calls."""
    ours = results.get("memoryconsole", {})
    floor = ours.get("floor_p50_ms")
    if not floor:
        return ""
    transport = ours.get("transport_p50_ms")
    lines = [
        f"\nMemory Console's request floor, an authenticated GET /api/v1/me through the same "
        f"server (the credential, the tenant's context, middleware, rendering; no memory "
        f"work): p50 {floor:.2f} ms."
    ]
    framework = ours.get("framework_p50_ms")
    if transport and framework:
        lines.append(
            f"Of it: HTTP itself {transport:.2f} ms (the same gunicorn settings and worker class "
            f"around a WSGI application answering a constant body, benchmarks/bare_http.py; the "
            f"same client); Django's middleware, DRF's dispatch and the answer "
            f"{framework - transport:.2f} ms (the same request without a credential: 401, no "
            f"database statement, {framework:.2f} ms in all); the database "
            f"{floor - framework:.2f} ms (the connection's health check, BEGIN, the "
            f"credential's statement, COMMIT: four round trips)."
        )
    lines.append(
        "Each operation beside the floor, and each peer's call (in its own process, no HTTP) "
        "beside it:"
    )

    def p50(r: dict[str, Any], op: str) -> float:
        return float(r["tenant"]["search_p50_ms"] if op == "search" else r[f"{op}_p50_ms"])

    for op in ("search", "write", "delete"):
        theirs = ", ".join(
            f"{r['system']} {p50(r, op) / floor:.2f}x"
            for name, r in results.items()
            if name != "memoryconsole"
        )
        lines.append(f"  {op}: Memory Console {p50(ours, op) / floor:.2f}x the floor; {theirs}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20_000, help="records loaded")
    parser.add_argument("--tenants", type=int, default=20, help="tenants (namespaces)")
    parser.add_argument("--queries", type=int, default=1000, help="searches per system")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--writes", type=int, default=100, help="writes and deletes per round")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers (up's default)")
    parser.add_argument("--seed", type=int, default=38)
    parser.add_argument(
        "--skip",
        action="append",
        default=[],
        help=f"leave out peers, comma-separated: {', '.join(PEERS)}, langgraph (both)",
    )
    parser.add_argument("--venv-dir", type=Path, default=ROOT / "var" / "bench-venvs")
    parser.add_argument("--json", type=Path, help="also write the results as JSON to this file")
    args = parser.parse_args()
    skipped = {s.strip() for item in args.skip for s in item.split(",") if s.strip()}
    if "langgraph" in skipped:
        skipped |= {"langgraph-hnsw", "langgraph-flat"}
    unknown = skipped - set(PEERS) - {"langgraph"}
    if unknown:
        parser.error(f"--skip: unknown {', '.join(sorted(unknown))}; one of {', '.join(PEERS)}")
    if min(args.records, args.tenants, args.queries, args.rounds) < 1 or args.writes < 0:
        parser.error("--records, --tenants, --queries and --rounds must be at least 1")
    systems = [name for name in SYSTEMS if name not in skipped]

    load_start = os.getloadavg()
    progress(f"load average at start: {' '.join(f'{x:.2f}' for x in load_start)}")
    pythons: dict[str, Path] = {"memoryconsole": Path(sys.executable)}
    for name in systems:
        venv = SYSTEMS[name][1]
        if venv is not None:
            pythons[name] = ensure_venv(args.venv_dir, venv)

    progress(f"generating {args.records:,} records and {args.queries:,} queries ...")
    data = generate(args.records, args.rounds * args.writes, args.tenants, args.queries, args.seed)
    truth = exact_top_k(data, args.records)
    (ROOT / "var").mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="peers-", dir=ROOT / "var"))
    data_path = work / "data.npz"
    np.savez(data_path, **data)

    results: dict[str, dict[str, Any]] = {}
    try:
        with bench_database("peers"), ExitStack() as stack:
            setup_django()
            tokens = product_tenants(args.tenants)
            port = stack.enter_context(gunicorn(args.workers, work / "gunicorn.log"))
            bare_port = stack.enter_context(
                gunicorn(args.workers, work / "bare.log", app="benchmarks.bare_http")
            )
            drivers = []
            for name in systems:
                config: dict[str, Any] = {"port": port, "bare_port": bare_port, "tokens": tokens}
                if name != "memoryconsole":
                    config = {"dsn": stack.enter_context(peer_database(name))}
                if name == "mem0":
                    config["history"] = str(work / "mem0-history.db")
                    config["mem0_dir"] = str(work / "mem0")
                progress(f"starting {name} ...")
                drivers.append(stack.enter_context(driver(name, pythons[name], data_path, config)))
            # All at once: loading is not what is compared, and the slowest takes minutes.
            progress(f"loading {args.records:,} records into each system at once ...")
            for d in drivers:
                d.write_command({"op": "load", "stop": args.records})
            for d in drivers:
                d.load_seconds = d.read()["seconds"]
                progress(f"{d.name}: loaded in {d.load_seconds:.1f}s")
            warmup = list(range(min(20, args.queries)))
            for d in drivers:  # imports, connections, caches: not measured
                d.send({"op": "search", "queries": warmup})
            run_rounds(drivers, args, args.records)
            results = {d.name: summary(d, data, truth) for d in drivers}
    finally:
        shutil.rmtree(work, ignore_errors=True)

    load_end = os.getloadavg()
    command = "benchmarks/peers.py " + " ".join(sys.argv[1:])
    print(
        f"\nPeers on the same {args.records:,} vectors ({DIM} dimensions), {args.tenants} "
        f"tenants, {args.queries:,} searches (half also filtered to a tenth of the tenant), "
        f"{args.rounds} interleaved rounds of {args.writes} writes and deletes; one client\n"
    )
    print(report(results))
    print(
        "\nMC / peer: Memory Console's value over the peer's (latency: below 1 is faster; "
        "writes/s: above 1 is faster). recall@10 against the exact top 10 of the query's "
        "tenant and filter (cosine >= 0); short: answers with fewer hits than that top 10."
    )
    for r in results.values():
        print(f"  {r['system']}: {json.dumps(r['info'])}")
    print(floor_report(results))
    print(
        f"\nload average: start {' '.join(f'{x:.2f}' for x in load_start)}, "
        f"end {' '.join(f'{x:.2f}' for x in load_end)} ({os.cpu_count()} cores)"
    )
    print(f"command: {command}")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "command": command,
                    "arguments": {k: str(v) for k, v in vars(args).items()},
                    "load_average": {"start": load_start, "end": load_end},
                    "results": results,
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
