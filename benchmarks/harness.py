"""Shared benchmark plumbing: a throw-away database on the embedded server, timing, tables.

Every benchmark runs against its own freshly migrated database (``bench_<name>``) on the
embedded PostgreSQL, as the application role (row-level security on), and drops it at the
end. Numbers are wall-clock on this machine; each benchmark prints the comparison its issue
names, measured in the same run.
"""

from __future__ import annotations

import http.client
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@contextmanager
def bench_database(
    name: str, *, keep: bool = False, reuse: bool = False
) -> Iterator[dict[str, str]]:
    """Create and migrate ``bench_<name>``; yield the environment that selects it.

    ``reuse``: take the database an earlier ``keep`` left (migrated, never dropped)."""
    if os.environ.get("DATABASE_URL"):
        sys.exit("Benchmarks run on the embedded database: unset DATABASE_URL.")
    import psycopg
    from psycopg import sql

    from memoryconsole import embedded, instance

    # The benchmark is an entry point: it prepares the instance and holds the server.
    instance.setup(database=False)
    server = embedded.start(instance.home())
    dbname = f"bench_{name}"
    admin = psycopg.conninfo.make_conninfo(
        host=str(server.socket_dir), user=embedded.OWNER_ROLE, dbname=embedded.DATABASE_NAME
    )

    def drop() -> None:
        with psycopg.connect(admin, autocommit=True) as conn:
            # The sessions of a server the benchmark has just stopped may still be ending;
            # FORCE cannot end them, as the owner may not signal the application role's.
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                others = conn.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = %s", [dbname]
                ).fetchone()
                if not others or not others[0]:
                    break
                time.sleep(0.2)
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(dbname))
            )

    if reuse:
        with psycopg.connect(admin, autocommit=True) as conn:
            found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [dbname])
            if found.fetchone() is None:
                sys.exit(f"No {dbname} to reuse: run once with --keep first.")
    else:
        drop()
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))
    env = {"MEMORYCONSOLE_DATABASE_NAME": dbname}
    progress(f"migrating {dbname} ...")
    subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "migrate", "-v", "0"],
        env={**os.environ, **env},
        check=True,
    )
    os.environ.update(env)
    try:
        yield env
    finally:
        if not (keep or reuse):
            from django.db import connections

            connections.close_all()
            drop()


def setup_django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryconsole.settings")
    import django

    django.setup()


def progress(message: str) -> None:
    print(f"  .. {message}", file=sys.stderr, flush=True)


@dataclass
class Timing:
    label: str
    seconds: list[float]
    wall: float

    @property
    def count(self) -> int:
        return len(self.seconds)

    @property
    def per_second(self) -> float:
        return self.count / self.wall if self.wall else 0.0

    def percentile(self, p: float) -> float:
        ordered = sorted(self.seconds)
        index = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
        return ordered[index]

    @property
    def p50_ms(self) -> float:
        return self.percentile(50) * 1000

    @property
    def p95_ms(self) -> float:
        return self.percentile(95) * 1000

    @property
    def mean_ms(self) -> float:
        return statistics.fmean(self.seconds) * 1000


def measure(label: str, count: int, operation: Callable[[int], object]) -> Timing:
    """Run ``operation(i)`` ``count`` times, timing each call and the whole run."""
    seconds: list[float] = []
    started = time.perf_counter()
    step = max(1, count // 10)
    for i in range(count):
        t0 = time.perf_counter()
        operation(i)
        seconds.append(time.perf_counter() - t0)
        if (i + 1) % step == 0:
            progress(f"{label}: {i + 1}/{count}")
    return Timing(label, seconds, time.perf_counter() - started)


def table(headers: list[str], rows: list[list[object]]) -> str:
    """A plain-text table (Markdown-compatible)."""
    cells = [[str(h) for h in headers]] + [[_fmt(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = []
    for n, row in enumerate(cells):
        lines.append(
            "| "
            + " | ".join(c.rjust(widths[i]) if n else c.ljust(widths[i]) for i, c in enumerate(row))
            + " |"
        )
        if n == 0:
            lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:,.2f}"
    return str(value)


def histogram(timing: Timing, *, buckets: int = 12, width: int = 40) -> str:
    """A text histogram of latencies (ms): the distribution at a glance in a terminal."""
    values = [s * 1000 for s in timing.seconds]
    low, high = min(values), timing.percentile(99) * 1000
    if high <= low:
        high = low + 1e-6
    size = (high - low) / buckets
    counts = [0] * buckets
    for v in values:
        counts[min(buckets - 1, int((min(v, high) - low) / size))] += 1
    peak = max(counts) or 1
    lines = [f"{timing.label} latency (ms), {timing.count} calls, tail >p99 in the last bucket"]
    for i, c in enumerate(counts):
        edge = low + i * size
        lines.append(f"  {edge:8.2f} | {'#' * round(c / peak * width):<{width}} {c}")
    return "\n".join(lines)


def wait_healthy(port: int, *, timeout: float) -> None:
    """Until the server on ``port`` (loopback) answers its health check, at most ``timeout``
    seconds: a benchmark's own gunicorn, just started."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/api/v1/health")
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass  # not listening yet; the deadline bounds the wait
        if time.monotonic() > deadline:
            raise RuntimeError("gunicorn did not become healthy")
        time.sleep(0.2)
