"""The whole product started as a user starts it, for the benchmarks that need real processes.

``memoryconsole up`` on a fresh home (its own embedded PostgreSQL under a temporary
directory), its log in that home, and small helpers to call its API and commands.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.harness import progress

COMMAND = Path(sys.executable).with_name("memoryconsole")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def request(url: str, token: str = "", body: dict[str, Any] | None = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    call = urllib.request.Request(url, data=data)  # noqa: S310 - http://127.0.0.1
    call.add_header("Content-Type", "application/json")
    if token:
        call.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(call, timeout=30) as response:  # noqa: S310
        return json.loads(response.read())


def home_env(home: Path) -> dict[str, str]:
    """The environment of a product living in ``home``: the embedded defaults, nothing
    inherited that would point it elsewhere."""
    env = {**os.environ, "MEMORYCONSOLE_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    for name in ("DATABASE_URL", "DATABASE_APP_URL", "CELERY_BROKER_URL"):
        env.pop(name, None)
    return env


def command(home: Path, *argv: str) -> str:
    """Run ``memoryconsole ARGV`` against ``home``; its last line of output."""
    out = subprocess.run(
        [str(COMMAND), *argv], env=home_env(home), capture_output=True, text=True, check=True
    )
    return out.stdout.strip().splitlines()[-1]


@dataclass
class Running:
    home: Path
    base: str
    process: subprocess.Popen[bytes]

    def tenant_with_token(self, slug: str) -> str:
        command(self.home, "create-tenant", slug)
        return command(self.home, "create-token", slug, "--name", "bench")


@contextmanager
def running_up(home: Path | None = None, *, workers: int = 2) -> Iterator[Running]:
    """``memoryconsole up`` with its defaults until the block ends (then Ctrl-C)."""
    home = home or Path(tempfile.mkdtemp(prefix="mc-bench-"))
    port = free_port()
    log_path = home / "up.log"
    seen = log_path.stat().st_size if log_path.exists() else 0  # an earlier up's lines
    progress(f"starting memoryconsole up in {home} ...")
    with log_path.open("ab") as log:
        up = subprocess.Popen(
            [str(COMMAND), "up", "--port", str(port), "--workers", str(workers)],
            env=home_env(home),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 180
        while "Press Ctrl-C" not in log_path.read_bytes()[seen:].decode(errors="replace"):
            if up.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(log_path.read_text(errors="replace")[-3000:])
            time.sleep(0.5)
        yield Running(home, f"http://127.0.0.1:{port}", up)
    finally:
        up.send_signal(signal.SIGINT)
        up.wait(60)
