"""``up`` restarts what dies: a SIGKILLed Celery worker and a SIGKILLed PostgreSQL postmaster
come back, the broker's tasks run again, and nothing outlives ``up``. ``.ci/run`` runs the
fault suite as its own step (``-m faults``)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.test_up import (
    _assert_nothing_left,
    _child,
    _postmaster,
    _probe_runs,
    _wait_for,
    running_up,
)

pytestmark = [pytest.mark.slow, pytest.mark.faults]


def test_it_restarts_a_child_that_dies_and_the_database(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with running_up(home, tmp_path) as up:
        up.wait_healthy()
        old_worker = _child(up, "worker")
        old_worker.kill()  # SIGKILL: no clean-up of its own
        _wait_for(up, "the worker process exited")
        _wait_for(up, "restarted the worker process")
        assert _child(up, "worker").pid != old_worker.pid
        _probe_runs(home, up)

        old_postmaster = _postmaster(home)
        old_postmaster.kill()
        # up (or a child restarted meanwhile) starts it again; the web answers 503 until then.
        deadline = time.monotonic() + 60
        while up.get("/api/v1/health")[0] != 200:
            assert time.monotonic() < deadline, f"not healthy again:\n{up.output()}"
            time.sleep(0.5)
        assert _postmaster(home).pid != old_postmaster.pid
        _probe_runs(home, up)
        assert up.process.poll() is None
        assert up.interrupt() == 0
    _assert_nothing_left(home, up)  # the restarted server stops with up, too
