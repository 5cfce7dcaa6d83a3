"""Context searches on the primary alone and routed to a local streaming replica, and the
replica's lag under a write load.

    .venv/bin/python benchmarks/replicas.py [--records 2000] [--rounds 6] [--searches 40]
        [--load-batches 10]

On a fresh database of the embedded PostgreSQL, makes a hot standby of the server
(tests/replica_server.py: ``pg_basebackup -R``, started on another socket of this machine) and
configures it as a deployment does (``DATABASE_REPLICA_URLS``, read when the settings load).
Writes ``--records`` memories through the batch API and embeds them (hashing-256), then runs
``POST /api/v1/search`` (``purpose: context``, the lag-tolerant kind) in process with Django's
test client: interleaved rounds of ``--searches`` searches with replicas switched off (every
read on the primary) and on (routed by ``apps.tenancy.replicas``), the first mode of each round
alternating. Prints search p50/p95 per mode, their ratio (what routing adds: the replica's own
transaction and its replay check), and the share of routed reads the replica served, read from
``memoryconsole_replica_reads_total``. Then a writer thread posts ``--load-batches`` batches of
100 memories while the main thread searches (routed) and samples the primary's
``pg_stat_replication`` every 50 ms: how far behind the replica is, in WAL bytes
(``pg_wal_lsn_diff`` of the primary's position and the replica's replay) and in time
(``replay_lag``). On this 2-core machine the replica and the primary share the cores: no
throughput gain is expected, the figures that matter are the ratios and the lag.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.harness import Timing, bench_database, progress, setup_django, table

WORDS = [
    "carrier",
    "invoice",
    "refund",
    "parcel",
    "warehouse",
    "courier",
    "delivery",
    "customs",
    "pallet",
    "address",
    "weekend",
    "express",
    "tracking",
    "damaged",
    "return",
    "label",
]
BATCH = 100  # memories per batch request (the API takes up to 500)


def memory(n: int, run: str) -> dict[str, Any]:
    words = [WORDS[(n * k + k) % len(WORDS)] for k in (1, 3, 7)]
    return {
        "key": f"note.{n % 40}",
        "subject": f"user:{n % 200}",
        "value": f"{' '.join(words)} for order {n}",
        "observed_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "source": {"kind": "interaction", "ref": f"{run}:{n}"},
        "owner": "user:alice",
        "reason": "benchmark memory",
        "scope": {"domain": "commerce", "task_type": "checkout"},
        "sensitivity": "internal",
        "retention": {"basis": "contract", "ttl": "P30D"},
    }


class Api:
    """One credential of the benchmark tenant, calling the API in process."""

    def __init__(self, token: str) -> None:
        from django.test import Client

        self.client = Client(HTTP_HOST="127.0.0.1")
        self.headers = {"authorization": f"Bearer {token}"}

    def post(self, path: str, body: dict[str, Any]) -> Any:
        response = self.client.post(path, body, "application/json", headers=self.headers)
        if response.status_code != 200:
            raise SystemExit(f"POST {path}: {response.status_code} {response.content[:600]!r}")
        return response.json()

    def write(self, start: int, count: int, run: str) -> None:
        items = [memory(n, run) for n in range(start, start + count)]
        answer = self.post("/api/v1/records/batch", {"items": items})
        if answer["succeeded"] != count:
            raise SystemExit(f"batch: {answer['failed']} failed: {answer['items'][:2]!r}")

    def search(self, i: int) -> None:
        query = f"{WORDS[i % len(WORDS)]} {WORDS[(i * 5 + 2) % len(WORDS)]}"
        body: dict[str, Any] = {"query": query, "purpose": "context", "top_k": 10}
        if i % 2:
            body["subject"] = f"user:{i % 200}"
        self.post("/api/v1/search", body)

    def listing(self, i: int) -> None:
        response = self.client.get(
            "/api/v1/records", {"subject": f"user:{i % 200}"}, headers=self.headers
        )
        if response.status_code != 200:
            raise SystemExit(f"GET /api/v1/records: {response.status_code}")


def served() -> dict[str, float]:
    """Lag-tolerant reads served so far, by where (``replica``, ``primary: <reason>``)."""
    from prometheus_client import REGISTRY

    counts: dict[str, float] = {}
    for metric in REGISTRY.collect():
        for sample in metric.samples:
            if sample.name == "memoryconsole_replica_reads_total":
                by, reason = sample.labels["served_by"], sample.labels.get("reason", "")
                key = by if not reason else f"{by}: {reason}"
                counts[key] = counts.get(key, 0.0) + sample.value
    return counts


def replica_share(before: dict[str, float], after: dict[str, float]) -> tuple[float, str]:
    delta = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
    total = sum(delta.values())
    others = ", ".join(f"{k} {v:.0f}" for k, v in delta.items() if k != "replica" and v)
    return (delta.get("replica", 0.0) / total if total else 0.0), others or "-"


def searches(api: Api, label: str, count: int, offset: int) -> list[float]:
    seconds = []
    for i in range(count):
        t0 = time.perf_counter()
        api.search(offset + i)
        seconds.append(time.perf_counter() - t0)
    return seconds


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--searches", type=int, default=40, help="per mode and round")
    parser.add_argument("--load-batches", type=int, default=10, help=f"of {BATCH} memories")
    args = parser.parse_args()
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")

    with bench_database("replicas"):
        from memoryconsole import instance
        from tests.replica_server import PORT, ReplicaServer

        progress("making a streaming replica of the embedded server (pg_basebackup -R) ...")
        replica = ReplicaServer.make(instance.home(), "bench-replica")
        try:
            # As a deployment configures it; the settings read it when they load, below.
            os.environ.setdefault("LOG_LEVEL", "WARNING")  # not a line per request
            os.environ["DATABASE_REPLICA_URLS"] = (
                f"postgresql://{quote(replica.host, safe='')}:{PORT}/"
            )
            setup_django()
            run(args, replica)
        finally:
            from django.db import connections

            connections.close_all()
            replica.remove()
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def run(args: argparse.Namespace, replica: Any) -> None:
    import psycopg
    from django.conf import settings
    from django.db import connections
    from django.test import override_settings

    from apps.core.actors import Actor
    from apps.derivations.embeddings import embeddings_drain
    from apps.tenancy.context import tenant_scope
    from apps.tenancy.services import credential_issue, tenant_create
    from memoryconsole import embedded

    assert settings.REPLICA_DATABASES, "DATABASE_REPLICA_URLS was not read"
    settings.OUTBOX_RELAY_ON_COMMIT = False  # no worker here: the benchmark drains itself
    actor = Actor.system("benchmark")
    tenant = tenant_create(slug="replicas", name="Replicas benchmark", actor=actor)
    tenant.embedding_model = "hashing-256"
    tenant.save(update_fields=["embedding_model"])
    with tenant_scope(tenant.pk):
        _c, writer_token = credential_issue(tenant=tenant, name="writer", actor=actor)
        _c, reader_token = credential_issue(tenant=tenant, name="reader", actor=actor)
    writer, reader = Api(writer_token), Api(reader_token)

    for start in range(0, args.records, BATCH):
        writer.write(start, min(BATCH, args.records - start), "base")
        if (start // BATCH + 1) % 5 == 0:
            progress(f"written {start + BATCH}/{args.records}")
    embedded_count = 0
    while (outcome := embeddings_drain(tenant.pk, budget=60.0)).claimed:
        embedded_count += outcome.embedded
    progress(f"embedded {embedded_count}; waiting for the replica to replay it")
    replica.caught_up()

    primary_only = override_settings(REPLICA_DATABASES=[])
    modes = {"primary only": primary_only, "routed": None}
    times: dict[str, list[float]] = {mode: [] for mode in modes}
    walls: dict[str, float] = dict.fromkeys(modes, 0.0)
    shares: dict[str, tuple[float, str]] = {}
    counts: dict[str, dict[str, float]] = {mode: {} for mode in modes}
    for mode, override in modes.items():  # warm-up: connections, caches
        if override:
            override.enable()
        try:
            searches(reader, mode, 10, 0)
        finally:
            if override:
                override.disable()
    for r in range(args.rounds):
        order = list(modes) if r % 2 == 0 else list(reversed(modes))
        for mode in order:
            override = modes[mode]
            before = served()
            started = time.perf_counter()
            if override:
                override.enable()
            try:
                times[mode] += searches(reader, mode, args.searches, r * args.searches)
            finally:
                if override:
                    override.disable()
            walls[mode] += time.perf_counter() - started
            after = served()
            for key in after:
                counts[mode][key] = counts[mode].get(key, 0.0) + after[key] - before.get(key, 0.0)
        progress(f"round {r + 1}/{args.rounds}")
    for mode in modes:
        shares[mode] = replica_share({}, counts[mode])

    rows = []
    for mode in modes:
        timing = Timing(mode, times[mode], walls[mode])
        share, others = shares[mode]
        rows.append(
            [
                mode,
                timing.count,
                timing.p50_ms,
                timing.p95_ms,
                timing.per_second,
                f"{share:.0%}",
                others,
            ]
        )
    print()
    print(
        f"Context searches, {args.records} memories (hashing-256), {args.rounds} interleaved"
        f" rounds of {args.searches} per mode, in process:"
    )
    print(
        table(
            [
                "mode",
                "searches",
                "p50 ms",
                "p95 ms",
                "searches/s",
                "served by replica",
                "served by primary",
            ],
            rows,
        )
    )
    p50 = {mode: Timing(mode, times[mode], 1.0).p50_ms for mode in modes}
    print(
        f"routed / primary-only p50: {p50['routed'] / p50['primary only']:.2f}"
        f" ({p50['routed'] - p50['primary only']:+.2f} ms a search)"
    )

    # --- lag under a write load -----------------------------------------------------------
    progress(f"write load: {args.load_batches} batches of {BATCH} while sampling the lag")
    done = threading.Event()
    failure: list[BaseException] = []

    def load() -> None:
        try:
            for b in range(args.load_batches):
                writer.write(b * BATCH, BATCH, "load")
        except BaseException as exc:  # reported by the main thread
            failure.append(exc)
        finally:
            connections.close_all()
            done.set()

    samples: list[tuple[int, float]] = []
    # Per kind of read during the load: latencies, and reads served by the replica / in all.
    kinds = {"search (POST)": reader.search, "listing (GET)": reader.listing}
    load_times: dict[str, list[float]] = {kind: [] for kind in kinds}
    on_replica: dict[str, list[int]] = {kind: [0, 0] for kind in kinds}
    thread = threading.Thread(target=load, name="write-load")
    with psycopg.connect(
        host=str(replica.primary), user=embedded.SUPERUSER, dbname="postgres", autocommit=True
    ) as primary:
        lag_sql = (
            "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn)::bigint,"
            " coalesce(extract(epoch FROM replay_lag) * 1000, 0)::float8"
            " FROM pg_stat_replication"
        )
        next_sample = time.perf_counter()
        thread.start()
        i = 0
        while not done.is_set():
            if time.perf_counter() >= next_sample:
                row = primary.execute(lag_sql).fetchone()
                if row is not None:
                    samples.append((int(row[0]), float(row[1])))
                next_sample += 0.05
            kind = list(kinds)[i % 2]
            before = served()
            t0 = time.perf_counter()
            kinds[kind](i)
            load_times[kind].append(time.perf_counter() - t0)
            after = served()
            on_replica[kind][0] += round(after.get("replica", 0) - before.get("replica", 0))
            on_replica[kind][1] += round(sum(after.values()) - sum(before.values()))
            i += 1
        thread.join()
    if failure:
        raise failure[0]
    print()
    print(
        f"Replication lag under a write load ({args.load_batches} batch writes of {BATCH},"
        f" one writer thread), the primary's pg_stat_replication every 50 ms:"
    )
    lag_bytes = [float(b) for b, _ in samples] or [0.0]
    lag_ms = [ms for _, ms in samples] or [0.0]
    print(
        table(
            ["samples", "measure", "p50", "p95", "max"],
            [
                [
                    len(samples),
                    "WAL behind (bytes)",
                    f"{percentile(lag_bytes, 50):,.0f}",
                    f"{percentile(lag_bytes, 95):,.0f}",
                    f"{max(lag_bytes):,.0f}",
                ],
                [
                    len(samples),
                    "replay_lag (ms)",
                    percentile(lag_ms, 50),
                    percentile(lag_ms, 95),
                    max(lag_ms),
                ],
            ],
        )
    )
    print()
    # Its searches are POSTs: the server keeps a read-your-writes position after them too.
    print("Reads of another credential meanwhile (it writes no memory; routed):")
    rows = []
    for kind, seconds in load_times.items():
        replica_count, total = on_replica[kind]
        part = f"{replica_count / total:.0%}" if total else "-"
        rows.append([kind, len(seconds), percentile(seconds, 50) * 1000, part])
    print(table(["read", "calls", "p50 ms", "served by replica"], rows))


if __name__ == "__main__":
    main()
