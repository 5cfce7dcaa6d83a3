"""``memoryconsole up`` end to end: real processes, a fresh embedded PostgreSQL, real HTTP.

Each test runs ``up`` as a subprocess with its own ``MEMORYCONSOLE_HOME`` (so a fresh
``initdb``) and ``DATABASE_URL`` unset, and checks that nothing it started outlives it.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.processes import free_port, memoryconsole_command, wait_ready

pytestmark = pytest.mark.slow

STOP_TIMEOUT = 20.0
# Variables that would point up at another server, broker or role than the embedded default.
FOREIGN_ENV = ("DATABASE_URL", "DATABASE_APP_URL", "CELERY_BROKER_URL", "MEMORYCONSOLE_DB_ROLE")


_free_port = free_port
_command = memoryconsole_command


def _env(home: Path, **overrides: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in FOREIGN_ENV}
    env["MEMORYCONSOLE_HOME"] = str(home)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(overrides)
    return env


class Up:
    """One running ``memoryconsole up``, its log, and its base URL."""

    def __init__(self, process: subprocess.Popen[bytes], log: Path, port: int) -> None:
        self.process = process
        self.log = log
        self.base = f"http://127.0.0.1:{port}"

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def get(self, path: str, token: str | None = None) -> tuple[int, bytes]:
        request = urllib.request.Request(self.base + path)  # noqa: S310 - http://127.0.0.1
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(request, timeout=5) as response:  # noqa: S310
                return response.status, response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def wait_healthy(self) -> dict[str, Any]:
        answer: dict[str, Any] = {}

        def healthy() -> bool:
            try:
                status, body = self.get("/api/v1/health")
            except OSError:
                return False
            if status == 200 and "Press Ctrl-C" in self.output():
                answer.update(json.loads(body))
                return True
            return False

        wait_ready(
            healthy,
            what=f"memoryconsole up at {self.base} (/api/v1/health answering 200, then its banner)",
            process=self.process,
            log=self.output,
            interval=0.5,
        )
        return answer

    def interrupt(self) -> int:
        """Ctrl-C, as a terminal would send it; the exit status."""
        self.process.send_signal(signal.SIGINT)
        try:
            return self.process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            pytest.fail(f"up did not exit within {STOP_TIMEOUT}s of SIGINT:\n{self.output()}")


def _processes_for(home: Path) -> list[str]:
    """Processes started for ``home``: the postgres server (by its data directory) and every
    Python child (by the MEMORYCONSOLE_HOME they inherit)."""
    found = []
    for process in psutil.process_iter(["pid", "cmdline"]):
        try:
            cmdline = " ".join(process.info["cmdline"] or [])
            uses_home = str(home) in cmdline or (
                process.environ().get("MEMORYCONSOLE_HOME") == str(home)
            )
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        if uses_home and process.pid != os.getpid():
            found.append(f"{process.pid}: {cmdline}")
    return found


@contextmanager
def running_up(
    home: Path,
    tmp_path: Path,
    *args: str,
    name: str = "up",
    workers: int = 1,
    env: dict[str, str] | None = None,
) -> Iterator[Up]:
    port = _free_port()
    log = tmp_path / f"{name}.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [*_command(), "up", "--port", str(port), "--workers", str(workers), *args],
            env=_env(home, **(env or {})),
            stdout=sink,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    up = Up(process, log, port)
    try:
        yield up
    finally:
        if process.poll() is None:  # a failed assertion: do not leave it running
            process.send_signal(signal.SIGINT)
            try:
                process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _assert_nothing_left(home: Path, up: Up) -> None:
    leftovers = _processes_for(home)
    assert leftovers == [], f"left running after up exited: {leftovers}\n{up.output()}"


# Two full starts of `up` and a Ctrl-C between: minutes on a busy machine, so it runs in
# .ci/run's fault step, beside the kill tests.
@pytest.mark.faults
def test_it_serves_the_product_stops_on_ctrl_c_and_keeps_the_data_for_the_next_up(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    with running_up(home, tmp_path, "--demo", name="first") as first:
        health = first.wait_healthy()
        assert health["database"] == "ok"
        assert re.fullmatch(r"\d+\.\d+(\.\d+)?", health["vector"]), health
        assert health["broker"].startswith("ok"), health

        status, page = first.get("/console/")  # redirects to the login page
        assert status == 200
        assert b"<form" in page
        status, _ = first.get("/api/docs/")
        assert status == 200
        # Swagger UI's assets come from our static files (whitenoise), not a CDN.
        status, _ = first.get("/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui.css")
        assert status == 200

        # A task sent by another process through the broker runs in up's worker.
        _probe_runs(home, first)

        output = first.output()
        assert "embedded PostgreSQL in" in output
        assert f"{first.base}/console/" in output
        assert f"{first.base}/api/docs/" in output
        tokens = re.findall(r"^\s*(mc_\S+)\s*$", output, flags=re.MULTILINE)
        assert len(tokens) == 1, output
        assert "demo-admin" in output
        assert first.interrupt() == 0
    assert "Traceback" not in first.output()
    _assert_nothing_left(home, first)

    with running_up(home, tmp_path, "--demo", name="second") as second:
        second.wait_healthy()
        output = second.output()
        assert "creating the embedded PostgreSQL" not in output  # no second initdb
        assert "migrations: up to date" in output
        assert "already present" in output
        assert not re.search(r"^\s*mc_\S+\s*$", output, flags=re.MULTILINE), "a second token"
        # The credential issued by the first run still authenticates.
        status, body = second.get("/api/v1/me", token=tokens[0])
        assert status == 200, body
        assert json.loads(body)["tenant"] == "demo"
        assert second.interrupt() == 0
    _assert_nothing_left(home, second)


def _child(up: Up, word: str) -> psutil.Process:
    [found] = [
        child for child in psutil.Process(up.process.pid).children() if word in child.cmdline()
    ]
    return found


def _wait_for(up: Up, text: str) -> None:
    wait_ready(
        lambda: text in up.output(),
        what=f"the line {text!r} in the output of up",
        process=up.process,
        log=up.output,
    )


def _probe_runs(home: Path, up: Up) -> None:
    """A task sent through the broker runs in up's (current) worker."""
    sent = subprocess.run(
        [
            sys.executable,
            "-c",
            "import django; django.setup(); "
            "from memoryconsole.tasks import tenant_probe; print(tenant_probe.delay().id)",
        ],
        env=_env(home, DJANGO_SETTINGS_MODULE="memoryconsole.settings"),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    _wait_for(up, f"tenant_probe[{sent.stdout.strip().splitlines()[-1]}] succeeded")


def _postmaster(home: Path) -> psutil.Process:
    for process in psutil.process_iter(["cmdline"]):
        cmdline = process.info["cmdline"] or []
        if cmdline and cmdline[0].endswith("postgres") and str(home) in " ".join(cmdline):
            return process
    pytest.fail("no postmaster for this home")


def _complaints(stderr: str) -> list[str]:
    """up's own error lines (Django's system-check warnings may precede them)."""
    return [line for line in stderr.splitlines() if line.startswith("memoryconsole up:")]


def _listening(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def test_it_refuses_a_server_without_pgvector_in_one_line(tmp_path: Path) -> None:
    if not _listening("127.0.0.1", 5432):
        pytest.skip("no PostgreSQL listens on 127.0.0.1:5432 (the server without pgvector)")
    url = "postgresql://postgres@127.0.0.1:5432/test"
    started = time.monotonic()
    result = subprocess.run(
        [*_command(), "up", "--port", str(_free_port())],
        env=_env(tmp_path / "home", DATABASE_URL=url),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1, result
    assert time.monotonic() - started < 20
    assert "Traceback" not in result.stderr + result.stdout
    [message] = _complaints(result.stderr)
    assert "pgvector" in message
    assert "'vector' extension is not available" in message
    assert "unset DATABASE_URL" in message


def test_it_refuses_an_unreachable_server_in_one_line(tmp_path: Path) -> None:
    url = f"postgresql://postgres@127.0.0.1:{_free_port()}/nothing"
    result = subprocess.run(
        [*_command(), "up", "--port", str(_free_port())],
        env=_env(tmp_path / "home", DATABASE_URL=url),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1, result
    assert "Traceback" not in result.stderr + result.stdout
    [message] = _complaints(result.stderr)
    assert "cannot connect to the PostgreSQL server in DATABASE_URL" in message
