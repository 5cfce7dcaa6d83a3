"""Batch writes against single writes, through the HTTP API.

    .venv/bin/python benchmarks/records_batch.py [--count 1000] [--sizes 10,100,500]
        [--model e5-small]

Starts gunicorn (one sync worker) on loopback against a fresh embedded database, then writes
``--count`` new facts as single ``POST /api/v1/records`` requests and again as ``POST
/api/v1/records/batch`` requests of each size, every request with an Idempotency-Key (as the
Python client sends it). Prints records/s, the time per request and the speed-up over single
writes. Each batch item is the same body a single write sends, so the difference is what a
batch shares: the HTTP exchange, authentication and the tenant context, the key's lock and
lookup, and the commit. With ``e5-small`` (the default) a single write embeds its version
inside the request, while a batch queues its embeddings for the worker (not run here: they
cost it the model's time afterwards); ``--model hashing-256`` queues them on both paths,
which shows what the batch saves of the rest.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.harness import (
    ROOT,
    Timing,
    bench_database,
    measure,
    progress,
    setup_django,
    table,
    wait_healthy,
)
from benchmarks.records_write import free_port, write_body


def post(port: int, token: str, path: str, payload: Any) -> dict[str, Any]:
    headers = {
        "Authorization": f"Bearer {token}",
        "Content-Type": "application/json",
        "Idempotency-Key": str(uuid.uuid4()),
    }
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request("POST", path, json.dumps(payload), headers)
        response = conn.getresponse()
        answer: dict[str, Any] = json.loads(response.read())
    finally:
        conn.close()
    if response.status not in (200, 201):
        raise RuntimeError(f"POST {path}: {response.status} {str(answer)[:300]}")
    return answer


def run_single(port: int, token: str, count: int) -> Timing:
    return measure(
        "single",
        count,
        lambda n: post(port, token, "/api/v1/records", write_body(n, "single")),
    )


def run_batches(port: int, token: str, count: int, size: int) -> Timing:
    def one(n: int) -> None:
        items = [write_body(n * size + i, f"batch{size}") for i in range(size)]
        answer = post(port, token, "/api/v1/records/batch", {"items": items})
        if answer["succeeded"] != size:
            raise RuntimeError(f"batch of {size}: {answer['failed']} items refused")

    return measure(f"batch of {size}", max(1, count // size), one)


def start_gunicorn(port: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "memoryconsole.wsgi",
            "-b",
            f"127.0.0.1:{port}",
            "-w",
            "1",
            "--timeout",
            "120",
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env={**os.environ, "ALLOWED_HOSTS": "127.0.0.1"},
        start_new_session=True,
    )


def report(model: str, sizes: list[int], single: Timing, batches: list[Timing]) -> None:
    single_rate = single.per_second
    rows: list[list[object]] = [
        ["single POST /records", 1, single.count, single.count, single_rate, single.p50_ms, "1.0x"]
    ]
    for size, timing in zip(sizes, batches, strict=True):
        records = timing.count * size
        rate = records / timing.wall
        rows.append(
            [
                "POST /records/batch",
                size,
                timing.count,
                records,
                rate,
                timing.p50_ms,
                f"{rate / single_rate:.1f}x",
            ]
        )
    print(
        "\nNew facts written through the HTTP API (gunicorn, one sync worker, loopback), "
        f"tenant model {model}\n"
    )
    headers = ["path", "items", "requests", "records", "records/s", "p50 ms/request", "vs single"]
    print(table(headers, rows))
    started = time.strftime("%Y-%m-%d %H:%M", time.localtime())
    print(f"\n{started}, embedded PostgreSQL 18, RLS on; every request with an Idempotency-Key.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1000, help="records per path")
    parser.add_argument("--sizes", default="10,100,500", help="batch sizes, comma-separated")
    parser.add_argument("--model", default="e5-small", help="the tenant's embedding model")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]

    with bench_database("records_batch"):
        setup_django()
        from apps.core.actors import Actor
        from apps.tenancy.context import tenant_scope
        from apps.tenancy.models import Tenant
        from apps.tenancy.services import credential_issue, tenant_create

        tenant = tenant_create(slug="bench", name="Benchmark")
        Tenant.objects.filter(pk=tenant.pk).update(embedding_model=args.model)
        with tenant_scope(tenant.pk):
            _credential, token = credential_issue(
                tenant=tenant, name="bench", actor=Actor.system("benchmark")
            )
        port = free_port()
        server = start_gunicorn(port)
        try:
            wait_healthy(port, timeout=60)
            progress("warming up")
            for n in range(20):
                post(port, token, "/api/v1/records", write_body(n, "warm"))
            post(port, token, "/api/v1/records/batch", {"items": [write_body(0, "warm-b")]})
            single = run_single(port, token, args.count)
            batches = [run_batches(port, token, args.count, size) for size in sizes]
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(10)
        # Before the database is dropped: the numbers outlive a failed clean-up.
        report(args.model, sizes, single, batches)


if __name__ == "__main__":
    main()
