"""Write throughput under `up`'s supervision beside the same processes run bare, in one run.

    .venv/bin/python benchmarks/supervised_writes.py [--writes 600] [--clients 4] [--rounds 2]

The fault suite (``tests/faults``) checks the product as ``memoryconsole up`` runs it: a
supervisor that restarts a child that dies (with backoff), reads ``/api/v1/health`` and probes
the embedded PostgreSQL every ``WATCH_INTERVAL`` seconds, restarts a stalled worker, and the
web's 503 answer while the database is away. This benchmark asks what that costs the writers:

* **supervised**: ``memoryconsole up`` with its defaults;
* **bare**: the same worker, beat and gunicorn command lines (``child_commands``, the ones up
  starts) and environment, started directly, with nothing watching them.

Both serve one home (one embedded PostgreSQL, held by this process throughout, so its caches
are shared) and one tenant. Each round starts a configuration, lets it settle (``--settle``
seconds: the worker's and beat's start-up take a core), makes 20 warm-up writes, then
``--writes`` API writes from ``--clients`` threads (each with its own ``Idempotency-Key``, as the
client library sends), and stops it; the rounds alternate the order (bare first, then
supervised first) so a drift of the machine's load falls on both. The embeddings of the writes
are drained by the worker in both, during and after the writes alike.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psutil

from benchmarks.harness import progress, table
from benchmarks.product import free_port, home_env, request, running_up

Started = tuple[str, Callable[[], None]]  # (base URL, stop)


def write_body(n: int, prefix: str) -> dict[str, Any]:
    return {
        "key": "shipping.preference",
        "subject": f"user:{prefix}-{n}",
        "value": {"carrier": "carrier_a", "n": n},
        "content": f"customer {prefix}-{n} prefers carrier a",
        "source": {"kind": "interaction", "ref": f"interaction:{prefix}-{n}"},
        # Now: a lifetime counts from observed_at, so a fixed date would expire.
        "observed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "owner": "service:bench",
        "reason": "supervision benchmark",
        "scope": {"domain": "commerce"},
        "sensitivity": "internal",
        "retention": {"basis": "contract", "ttl": "P30D"},
    }


def post(base: str, token: str, body: dict[str, Any]) -> None:
    call = urllib.request.Request(  # noqa: S310 - http://127.0.0.1
        f"{base}/api/v1/records", data=json.dumps(body).encode(), method="POST"
    )
    call.add_header("Authorization", f"Bearer {token}")
    call.add_header("Content-Type", "application/json")
    call.add_header("Idempotency-Key", uuid.uuid4().hex)
    with urllib.request.urlopen(call, timeout=30) as response:  # noqa: S310
        if response.status != 201:
            raise RuntimeError(f"write answered {response.status}")
        response.read()


def writes(
    base: str, token: str, count: int, clients: int, prefix: str, settle: float
) -> dict[str, float]:
    """``count`` writes from ``clients`` threads: writes/s and latency percentiles (ms).
    First ``settle`` seconds pass (the worker and beat finish starting: their imports take a
    core for seconds), then 20 warm-up writes."""
    time.sleep(settle)
    for n in range(20):
        post(base, token, write_body(n, f"{prefix}-warm"))
    latencies: list[float] = []

    def one(n: int) -> None:
        started = time.perf_counter()
        post(base, token, write_body(n, prefix))
        latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=clients) as pool:
        list(pool.map(one, range(count)))
    wall = time.perf_counter() - started
    ordered = sorted(latencies)
    return {
        "per_second": count / wall,
        "p50": ordered[len(ordered) // 2] * 1000,
        "p95": ordered[int(len(ordered) * 0.95)] * 1000,
    }


def wait_healthy(base: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            request(f"{base}/api/v1/health")
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)


def start_bare(home: Path) -> Started:
    """Worker, beat and gunicorn as up starts them, but by this process, unwatched."""
    os.environ["MEMORYCONSOLE_HOME"] = str(home)
    from memoryconsole.management.commands.up import child_commands, child_env

    port = free_port()
    env = child_env(home, "app", base=home_env(home))
    log = (home / "bare.log").open("ab")
    children = [
        subprocess.Popen(
            argv,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            process_group=0,
        )
        for argv in child_commands(host="127.0.0.1", port=port, workers=2, sql_broker=True).values()
    ]

    def stop() -> None:
        for child in children:
            os.killpg(child.pid, signal.SIGTERM)
        for child in children:
            try:
                child.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()
        log.close()

    base = f"http://127.0.0.1:{port}"
    wait_healthy(base)
    return base, stop


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--writes", type=int, default=600)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--settle", type=float, default=15.0, help="seconds before writing")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="mc-supervision-"))
    with running_up(home) as product:  # migrates, prepares the broker
        token = product.tenant_with_token("bench")
    # Held by this process from here on: neither configuration starts or stops the database.
    from memoryconsole import embedded

    embedded.ensure_embedded_server(home)
    results: dict[str, list[dict[str, float]]] = {"bare": [], "supervised": []}
    for round_number in range(args.rounds):
        order = ["bare", "supervised"] if round_number % 2 == 0 else ["supervised", "bare"]
        for name in order:
            prefix = f"{name}-{round_number}"
            progress(f"round {round_number + 1}: {name} ...")
            if name == "bare":
                base, stop = start_bare(home)
                try:
                    results[name].append(
                        writes(base, token, args.writes, args.clients, prefix, args.settle)
                    )
                finally:
                    stop()
            else:
                with running_up(home) as product:
                    supervisor = psutil.Process(product.process.pid)  # up itself, no child
                    before = supervisor.cpu_times()
                    result = writes(
                        product.base, token, args.writes, args.clients, prefix, args.settle
                    )
                    after = supervisor.cpu_times()
                    result["supervisor_cpu"] = (after.user + after.system) - (
                        before.user + before.system
                    )
                    results[name].append(result)

    def median(name: str, field: str) -> float:
        return statistics.median(r[field] for r in results[name])

    bare_rate = median("bare", "per_second")
    print(
        f"\n{args.writes} API writes x {args.rounds} rounds, {args.clients} clients, "
        "gunicorn 2 workers, worker and beat running (medians of the rounds)\n"
    )
    print(
        table(
            ["configuration", "writes/s", "p50 ms", "p95 ms", "writes/s ratio to bare"],
            [
                [
                    name,
                    f"{median(name, 'per_second'):.1f}",
                    f"{median(name, 'p50'):.1f}",
                    f"{median(name, 'p95'):.1f}",
                    f"{median(name, 'per_second') / bare_rate:.2f}",
                ]
                for name in ("bare", "supervised")
            ],
        )
    )
    cpu = statistics.median(r["supervisor_cpu"] for r in results["supervised"])
    print(
        "\nThe supervisor's own CPU time (the up process alone, not its children) while it"
        f" served a round ({args.settle:.0f} s settling, then 20 + {args.writes} writes):"
        f" median {cpu:.2f} s"
    )
    rounds = [
        [
            n + 1,
            f"{b['per_second']:.1f}",
            f"{s['per_second']:.1f}",
            f"{s['per_second'] / b['per_second']:.2f}",
        ]
        for n, (b, s) in enumerate(zip(results["bare"], results["supervised"], strict=True))
    ]
    print("\nEach round\n")
    print(table(["round", "bare writes/s", "supervised writes/s", "ratio"], rounds))


if __name__ == "__main__":
    main()
