"""``memoryconsole healthcheck web|worker|beat``: exit 0 when that kind of process is doing its
work, 1 (with one line saying why) when it is not, for a container's or an orchestrator's
health check (docker-compose.yml runs it; docs/deploy.md).

Each reads what the product itself records, not the process's insides (``celery inspect
ping`` asks every worker through the broker: slow, and it fails with the broker rather than
with the worker):

* ``web``: ``GET /api/v1/health/live`` on this machine answers ``200``. It reads nothing else,
  so a web process is not restarted for the database's absence. The entry point runs it
  without Django (``memoryconsole.probe``); this command offers it too.
* ``worker``: the database answers, and committed background work is not stalled (waiting
  past ``WORK_STALLED_AFTER`` with nothing finished in the last minute): what ``up`` restarts
  the worker for.
* ``beat``: the database answers, a beat holds the beat lock (``memoryconsole/beat.py``), and
  no scheduled task is overdue (health's ``scheduled``): beat sends, the tasks complete.

The worker's and beat's verdicts are about the deployment, not one process: every worker
fails while work is stalled, which is what restarting them is for. None starts the embedded
PostgreSQL or writes anything.

Docker without Swarm marks a container unhealthy and restarts nothing. ``--stop-main-process``
does what ``up`` does on a stall: on a verdict that a restart mends (stalled work, overdue
scheduled tasks; not an unreachable database) it also sends SIGTERM to the container's main
process (pid 1), whose restart policy then starts it again, at most once per
``STALL_RESTART_EVERY`` seconds of that process's life, as ``up`` restarts at most that often.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import Error as DatabaseError
from django.db import connection

from memoryconsole.beat import beat_lock_held
from memoryconsole.health import STALL_RESTART_EVERY, work_stalled
from memoryconsole.probe import DEFAULT_URL, Unhealthy, check_web
from memoryconsole.scheduled import overdue_after, scheduled_work

MAIN_PROCESS = 1  # a container's main process


def process_age(pid: int) -> float:
    """Seconds since process ``pid`` started (Linux's /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    started_ticks = int(fields[19])  # the stat file's 22nd field, after pid and (comm)
    uptime = float(Path("/proc/uptime").read_text().split()[0])
    return uptime - started_ticks / os.sysconf("SC_CLK_TCK")


def stop_main_process_now() -> str:
    """SIGTERM to pid 1 unless it started less than ``STALL_RESTART_EVERY`` seconds ago;
    says what it did."""
    age = process_age(MAIN_PROCESS)
    if age < STALL_RESTART_EVERY:
        return (
            f"not stopping the main process: it started {int(age)} s ago "
            f"(at most one restart per {int(STALL_RESTART_EVERY)} s)"
        )
    os.kill(MAIN_PROCESS, signal.SIGTERM)
    return "sent SIGTERM to the main process (pid 1): its restart policy starts it again"


def _database() -> None:
    try:
        connection.ensure_connection()
    except DatabaseError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise Unhealthy(f"the database is unreachable: {first}") from None


def check_worker() -> str:
    from apps.work.selectors import background_work

    _database()
    work = background_work()
    if work_stalled(work.oldest_waiting_seconds, work.done_last_minute):
        raise Unhealthy(
            f"background work is not completing: {work.waiting} item(s) waiting, the oldest "
            f"for {int(work.oldest_waiting_seconds or 0)} s (limit "
            f"{settings.WORK_STALLED_AFTER} s), none finished in the last minute",
            mended_by_restart=True,
        )
    return f"{work.waiting} item(s) waiting, {work.done_last_minute} finished in the last minute"


def check_beat() -> str:
    _database()
    if not beat_lock_held(connection):
        raise Unhealthy("no beat holds the beat lock: beat is not running against this database")
    overdue = [each for each in scheduled_work() if each.overdue]
    if overdue:
        raise Unhealthy(
            "scheduled work is not completing: "
            + ", ".join(
                f"{each.name} (nothing for {int(each.waiting_seconds)} s, limit "
                f"{overdue_after(each.every_seconds):g} s)"
                for each in overdue
            ),
            mended_by_restart=True,
        )
    return "a beat holds the lock and no scheduled task is overdue"


class Command(BaseCommand):
    help = (
        "Exit 0 when web, worker or beat does its work, 1 with the reason when not: a health "
        "check for containers and orchestrators (docs/deploy.md)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("kind", choices=["web", "worker", "beat"])
        parser.add_argument(
            "--stop-main-process",
            action="store_true",
            help="worker, beat: when a restart would mend it, also stop the container's main "
            "process (pid 1) so that its restart policy starts it again (Docker without Swarm)",
        )
        parser.add_argument(
            "--url",
            help="web: the liveness URL to ask (default http://127.0.0.1:8000 and "
            "/api/v1/health/live)",
        )

    def handle(
        self, *args: Any, kind: str, url: str | None, stop_main_process: bool, **options: Any
    ) -> None:
        if url and kind != "web":
            raise CommandError(f"--url is for web only, not {kind}", returncode=2)
        if stop_main_process and kind == "web":
            # gunicorn replaces a worker that hangs by itself; a web process that does not
            # answer at all is the orchestrator's to restart.
            raise CommandError("--stop-main-process is for worker and beat", returncode=2)
        try:
            if kind == "web":
                verdict = check_web(url or DEFAULT_URL, settings.ALLOWED_HOSTS)
            elif kind == "worker":
                verdict = check_worker()
            else:
                verdict = check_beat()
        except Unhealthy as exc:
            self.stderr.write(f"{kind}: unhealthy: {exc}")
            if stop_main_process and exc.mended_by_restart:
                self.stderr.write(f"{kind}: {stop_main_process_now()}")
            raise SystemExit(1) from None
        self.stdout.write(f"{kind}: healthy: {verdict}")
