"""Scheduled work resumes by itself after another process restarts PostgreSQL, with nothing
being written: no queued work for ``up``'s stall check to notice, so only beat and the worker
reconnecting on their own bring reclamation, the broker purge, compaction and the relay back.

The database is stopped with ``pg_ctl`` from outside ``up`` while ``up`` is frozen (so it does
not start the server again before beat has tried, and failed, to send a task); thawed, ``up``
starts it again as it does for any database that stops answering. ``.ci/run`` runs the fault
suite as its own step (``-m faults``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.test_up import Up, _assert_nothing_left, _postmaster, running_up

pytestmark = [pytest.mark.slow, pytest.mark.faults]

STALLED_AFTER = 15  # seconds: the relay (every 2 s) is overdue 17 s after its last success
FAILED_SEND = "Couldn't apply scheduled task relay-outbox"


def _health(up: Up) -> tuple[int, dict[str, Any]]:
    try:
        status, body = up.get("/api/v1/health")
    except OSError:
        return 0, {}
    return status, json.loads(body) if status == 200 else {}


def _relay(health: dict[str, Any]) -> dict[str, Any]:
    return next((t for t in health.get("scheduled", []) if t["name"] == "relay-outbox"), {})


def _wait(what: str, done: Any, up: Up, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"{what} within {timeout}s:\n{up.output()[-6000:]}"
        time.sleep(0.5)


def _pg_ctl_stop(postmaster: psutil.Process, pgdata: Path) -> None:
    """``pg_ctl stop`` as the server's own user (pgserver runs it as another user under root)."""
    pg_ctl = Path(postmaster.exe()).with_name("pg_ctl")
    owner = postmaster.username()
    as_owner = {"user": owner} if os.geteuid() == 0 and owner != "root" else {}
    subprocess.run(
        [str(pg_ctl), "stop", "-D", str(pgdata), "-m", "fast", "-w"],
        check=True,
        capture_output=True,
        timeout=60,
        **as_owner,  # type: ignore[arg-type]
    )


def test_scheduled_work_resumes_after_the_database_restarts_with_no_traffic(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    tuning = {"MEMORYCONSOLE_WORK_STALLED_AFTER": str(STALLED_AFTER)}
    with running_up(home, tmp_path, env=tuning) as up:
        up.wait_healthy()
        _wait("the relay's first scheduled success", lambda: _relay(_health(up)[1]), up, 90)

        up.process.send_signal(signal.SIGSTOP)
        try:
            _pg_ctl_stop(_postmaster(home), home / "pgdata")
            failures_before = up.output().count(FAILED_SEND)
            _wait(
                "beat failing to send while the database is down",
                lambda: up.output().count(FAILED_SEND) > failures_before,
                up,
            )
        finally:
            up.process.send_signal(signal.SIGCONT)
        restarted = time.monotonic()
        _wait("the database started again by up", lambda: _health(up)[0] == 200, up)

        def relay_ran_since_restart() -> bool:
            ago = _relay(_health(up)[1]).get("last_succeeded_seconds_ago")
            return ago is not None and ago < time.monotonic() - restarted

        # Nothing restarts beat here (no queued work stalls): it must reconnect by itself.
        _wait("a scheduled task succeeding again", relay_ran_since_restart, up)
        _wait("health ok", lambda: _health(up)[1].get("status") == "ok", up)
        assert up.process.poll() is None
        assert up.interrupt() == 0
    _assert_nothing_left(home, up)
