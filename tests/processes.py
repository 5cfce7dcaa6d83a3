"""Helpers of the tests that start real processes (up, gunicorn, the MCP server)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

# How long a test waits for something it started to become ready (a health endpoint that
# answers, a port that listens) before failing. The test waits on readiness itself; this
# ceiling only tells a hang from a machine that is slow because it is busy (a loaded machine
# took over two minutes to start up), so it is generous, and this variable raises it further.
READY_CEILING = float(os.environ.get("MEMORYCONSOLE_TEST_READY_CEILING", "600"))


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def memoryconsole_command() -> list[str]:
    """The ``memoryconsole`` entry point of this environment."""
    script = Path(sys.executable).with_name("memoryconsole")
    return [str(script)] if script.exists() else [sys.executable, "-m", "memoryconsole.cli"]


def listening(port: int) -> bool:
    """Something accepts connections on 127.0.0.1:``port``."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def wait_ready(
    ready: Callable[[], bool],
    *,
    what: str,
    process: subprocess.Popen[bytes] | subprocess.Popen[str] | None = None,
    log: Callable[[], str] | None = None,
    interval: float = 0.25,
    ceiling: float = READY_CEILING,
) -> None:
    """Return once ``ready()``; fail at once when ``process`` exits first, and after
    ``ceiling`` seconds otherwise, saying what did not become ready (``what``), how long it
    was given, how busy the machine was, and the end of ``log()``."""
    started = time.monotonic()
    while not ready():
        waited = time.monotonic() - started
        tail = f"\n--- its output, last lines ---\n{log()[-3000:]}" if log is not None else ""
        if process is not None and process.poll() is not None:
            pytest.fail(
                f"{what}: the process exited (status {process.returncode}) after {waited:.0f}s,"
                f" before it was ready{tail}"
            )
        if waited > ceiling:
            load = ", ".join(f"{figure:.1f}" for figure in os.getloadavg())
            pytest.fail(
                f"{what}: not ready after {waited:.0f}s (the ceiling; load average {load};"
                f" MEMORYCONSOLE_TEST_READY_CEILING raises it){tail}"
            )
        time.sleep(interval)
