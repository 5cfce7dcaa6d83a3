"""One ``memoryconsole up`` (the README's way to start the server, on a fresh embedded
PostgreSQL) serves every client and MCP test: starting it costs most of their time."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.processes import free_port, memoryconsole_command, wait_ready

STOP_TIMEOUT = 20.0
# Variables that would point up at another server, broker or role than the embedded default.
FOREIGN_ENV = ("DATABASE_URL", "DATABASE_APP_URL", "CELERY_BROKER_URL", "MEMORYCONSOLE_DB_ROLE")
EVERY_ACTION = "read,write,search,delete,review,state,erase,audit"


def server_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in FOREIGN_ENV}
    env["MEMORYCONSOLE_HOME"] = str(home)
    env["PYTHONUNBUFFERED"] = "1"
    # An erasure of more than this many records is a job (202): small, so a test can follow one.
    env["ERASURE_JOB_THRESHOLD_RECORDS"] = "3"
    return env


@dataclass
class LiveServer:
    """A running ``memoryconsole up``, and credentials of two tenants on it."""

    url: str
    home: Path
    log: Path
    token: str  # tenant "acme", every action
    default_token: str  # tenant "acme", the default actions (no delete, erase, audit...)
    other_token: str  # tenant "globex", every action
    review_token: str = ""  # tenant "acme", read and review: decides what the others wrote

    def manage(self, *args: str) -> str:
        """Run a ``memoryconsole`` command against this server's database; its stdout."""
        done = subprocess.run(
            [*memoryconsole_command(), *args],
            env=server_env(self.home),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout.strip()

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/api/v1/health", timeout=5) as response:  # noqa: S310
            return response.status == 200 and json.loads(response.read())["database"] == "ok"
    except (OSError, urllib.error.HTTPError, ValueError, KeyError):
        return False


@pytest.fixture(scope="session")
def live_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    base = tmp_path_factory.mktemp("live-api")
    home, log = base / "home", base / "up.log"
    port = free_port()
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [*memoryconsole_command(), "up", "--port", str(port), "--workers", "1"],
            env=server_env(home),
            stdout=sink,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(
            lambda: _healthy(url) and "Press Ctrl-C" in log.read_text(errors="replace"),
            what=f"memoryconsole up at {url} (its /api/v1/health with the database ok, then "
            "its banner)",
            process=process,
            log=lambda: log.read_text(errors="replace"),
            interval=0.5,
        )
        server = LiveServer(url, home, log, "", "", "")
        # One at a time: each command attaches to the embedded server up started.
        server.manage("create-tenant", "acme")
        server.manage("create-tenant", "globex")
        server.token = server.manage(
            "create-token", "acme", "--name", "client-tests", "--actions", EVERY_ACTION
        )
        server.default_token = server.manage("create-token", "acme", "--name", "default-agent")
        server.other_token = server.manage(
            "create-token", "globex", "--name", "rival", "--actions", EVERY_ACTION
        )
        server.review_token = server.manage(
            "create-token", "acme", "--name", "reviewer", "--actions", "read,review"
        )
        yield server
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
