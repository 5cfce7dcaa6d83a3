"""A small process supervisor for ``memoryconsole up``: start, restart with backoff, stop all.

Procfile runners (honcho, foreman) stop everything when one process exits; ``up`` must instead
restart that one process (after 1 s, 2 s, 4 s ... at most 30 s), restart a worker that stalls,
and keep the embedded PostgreSQL running, so it keeps this supervisor. The process managers
that do restart (supervisord, circus) are daemons of their own, configured by file and
controlled over a socket (circus through ZeroMQ): ``up`` would start one, write its
configuration, and still poll the health endpoint for stalls and readiness, which is more
code than this module, not less. ``psutil.wait_procs`` could replace the wait in
:meth:`Supervisor.stop_all`, but not its second-Ctrl-C shortcut. What it guarantees:

* each child runs in its own process group, so a terminal's Ctrl-C reaches ``up`` only and
  ``up`` decides the order of the stop; on Linux a child also gets SIGTERM if ``up`` dies;
* :meth:`Supervisor.stop_all` sends SIGTERM, then SIGKILL to whatever is left after the
  timeout (at once when :attr:`Supervisor.force` is set), and sweeps each child's group, so
  no grandchild (a gunicorn worker) outlives ``up``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import IO

STOP_TIMEOUT = 10.0  # seconds a child gets between SIGTERM and SIGKILL
# Restarts of a child that died: 1 s, 2 s, 4 s ... at most this long; a child that ran for
# RESTART_RESET_AFTER seconds counts as healthy again and restarts after 1 s next time.
RESTART_BACKOFF_MAX = 30.0
RESTART_RESET_AFTER = 60.0


@dataclass
class Child:
    name: str
    process: subprocess.Popen[bytes]
    argv: list[str] = field(default_factory=list)
    env: dict[str, str] | None = None
    started_at: float = field(default_factory=time.monotonic)
    failures: int = 0  # consecutive early deaths, for the backoff
    restart_at: float | None = None  # set while a restart waits out its backoff

    @property
    def pid(self) -> int:
        return self.process.pid

    def backoff(self) -> float:
        """Seconds to wait before restarting this child, which has just died."""
        if time.monotonic() - self.started_at >= RESTART_RESET_AFTER:
            self.failures = 0
        self.failures += 1
        return float(min(2 ** (self.failures - 1), RESTART_BACKOFF_MAX))


def _die_with_parent() -> None:  # pragma: no cover - runs in the child, between fork and exec
    """Ask Linux to send SIGTERM to this process when its parent dies (even by SIGKILL)."""
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, int(signal.SIGTERM))


class Supervisor:
    """Starts children in their own process groups and stops all of them, always."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.children: list[Child] = []
        self.force = False  # set by a second Ctrl-C: skip the graceful wait

    def start(
        self,
        name: str,
        argv: list[str],
        *,
        env: dict[str, str] | None = None,
        stdout: IO[bytes] | None = None,
    ) -> Child:
        process = subprocess.Popen(
            argv,
            env=env or self.env,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=subprocess.STDOUT if stdout is not None else None,
            process_group=0,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )
        child = Child(name, process, argv=argv, env=env)
        self.children.append(child)
        return child

    def restart(self, child: Child) -> None:
        """Start ``child``'s command again in place of its process (stopped first if alive)."""
        if child.process.poll() is None:
            _signal_group(child.pid, signal.SIGTERM)
            try:
                child.process.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                _signal_group(child.pid, signal.SIGKILL)
                child.process.wait()
        _signal_group(child.pid, signal.SIGKILL)  # leftovers of its group (pool processes)
        replacement = self.start(child.name, child.argv, env=child.env)
        self.children.remove(replacement)
        child.process = replacement.process
        child.started_at = replacement.started_at
        child.restart_at = None

    def named(self, name: str) -> Child | None:
        return next((child for child in self.children if child.name == name), None)

    def exited(self) -> Child | None:
        """The first child that is no longer running, if any."""
        return next((child for child in self.children if child.process.poll() is not None), None)

    def stop_all(self, timeout: float = STOP_TIMEOUT) -> None:
        """SIGTERM every child, SIGKILL what is left after ``timeout``, sweep their groups."""
        for child in self.children:
            if child.process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(child.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not self.force:
            if all(child.process.poll() is not None for child in self.children):
                break
            time.sleep(0.1)
        for child in self.children:
            if child.process.poll() is None:
                _signal_group(child.pid, signal.SIGKILL)
            child.process.wait()
            # Grandchildren (pool processes, gunicorn workers) normally leave with their
            # parent; anything still in the group now would outlive up.
            _signal_group(child.pid, signal.SIGKILL)
        self.children.clear()


def _signal_group(pgid: int, signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)
