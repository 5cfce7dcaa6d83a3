"""How fast `up` drains an embedding backlog, beside the embedder's own rate, in one run.

    .venv/bin/python benchmarks/embedding_drain.py [--records 1500]

Starts ``memoryconsole up`` as a new user would (its defaults, the embedded PostgreSQL, a
fresh data directory under a temporary home) and a tenant with the default embedder. Then:

1. **Embedder rate**: the tenant's embedder on the same texts, one text per call (a task
   embeds one record), in this process: the ceiling no queue can beat.
2. **Drain rate**: the worker is paused (SIGSTOP on its process group), ``--records`` records
   are written through the API, the worker resumes, and the clock runs until
   ``/api/v1/health`` reports no waiting work. Records per second of that interval.

Target: drain rate at least 0.8x the embedder rate.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.harness import progress, table

ROOT = Path(__file__).resolve().parent.parent


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _request(url: str, token: str = "", body: dict[str, Any] | None = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data)  # noqa: S310 - http://127.0.0.1
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
        return json.loads(response.read())


def _texts(count: int) -> list[str]:
    return [
        f"customer {n} prefers carrier {n % 7} for parcels to zone {n % 13}" for n in range(count)
    ]


def embedder_rate(texts: list[str]) -> float:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryconsole.settings")
    import django

    django.setup()
    from apps.derivations.embedders import get_embedder
    from apps.tenancy.models import Tenant

    embedder = get_embedder(Tenant._meta.get_field("embedding_model").get_default())
    started = time.perf_counter()
    for text in texts:
        embedder.embed([text])
    return len(texts) / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=1500)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="mc-drain-"))
    env = {**os.environ, "MEMORYCONSOLE_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    for name in ("DATABASE_URL", "DATABASE_APP_URL", "CELERY_BROKER_URL"):
        env.pop(name, None)
    os.environ["MEMORYCONSOLE_HOME"] = str(home)
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    log = (home / "up.log").open("wb")
    command = Path(sys.executable).with_name("memoryconsole")
    progress(f"starting memoryconsole up in {home} ...")
    up = subprocess.Popen(
        [str(command), "up", "--port", str(port)], env=env, stdout=log, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + 180
        while "Press Ctrl-C" not in (home / "up.log").read_text(errors="replace"):
            if up.poll() is not None or time.monotonic() > deadline:
                raise SystemExit((home / "up.log").read_text(errors="replace")[-3000:])
            time.sleep(0.5)

        def mc(*argv: str) -> str:
            out = subprocess.run(
                [str(command), *argv], env=env, capture_output=True, text=True, check=True
            )
            return out.stdout.strip().splitlines()[-1]

        mc("create-tenant", "bench")
        token = mc("create-token", "bench", "--name", "drain")
        texts = _texts(args.records)
        progress("measuring the embedder alone ...")
        own_rate = embedder_rate(texts)

        import psutil

        [worker] = [c for c in psutil.Process(up.pid).children() if "worker" in c.cmdline()]
        os.killpg(worker.pid, signal.SIGSTOP)
        progress(f"writing {args.records} records with the worker paused ...")

        def write(n: int) -> None:
            _request(
                f"{base}/api/v1/records",
                token,
                {
                    "key": f"shipping.preference.{n}",
                    "subject": f"user:{n}",
                    "value": n,
                    "content": texts[n],
                    "source": {"kind": "interaction", "ref": f"interaction:{n}"},
                    "observed_at": "2026-01-01T00:00:00Z",
                    "owner": "service:bench",
                    "reason": "drain benchmark",
                    "scope": {"domain": "commerce"},
                    "sensitivity": "internal",
                    "retention": {"basis": "contract", "ttl": "P30D"},
                },
            )

        with ThreadPoolExecutor(max_workers=4) as pool:
            list(pool.map(write, range(args.records)))
        waiting = _request(f"{base}/api/v1/health")["work"]["waiting"]
        progress(f"{waiting} embeddings waiting; resuming the worker ...")
        started = time.perf_counter()
        os.killpg(worker.pid, signal.SIGCONT)
        while True:
            left = _request(f"{base}/api/v1/health")["work"]["waiting"]
            progress(f"  {left} waiting")
            if left == 0:
                break
            time.sleep(0.5)
        drain = waiting / (time.perf_counter() - started)
        print(
            table(
                ["what", "per second", "ratio to the embedder"],
                [
                    ["embedder alone (one text per call)", f"{own_rate:.0f}", "1.00"],
                    ["backlog drained by up's worker", f"{drain:.0f}", f"{drain / own_rate:.2f}"],
                ],
            )
        )
    finally:
        up.send_signal(signal.SIGINT)
        up.wait(60)


if __name__ == "__main__":
    main()
