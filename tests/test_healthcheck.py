"""``memoryconsole healthcheck web|worker|beat`` (the containers' health checks) and beat's
lock: exit 0 while each does its work, 1 with one line saying why when not; a second beat
cannot take the lock the first holds."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.utils import timezone

from memoryconsole import probe
from memoryconsole.beat import BeatLock, BeatLockLost
from memoryconsole.management.commands import healthcheck as healthcheck_command
from memoryconsole.scheduled import scheduled_run_succeeded, scheduled_runs_expect

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.django_db


def healthcheck(*args: str) -> tuple[int, str]:
    """Exit status and the one line the command printed."""
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("healthcheck", *args, stdout=out, stderr=err)
    except SystemExit as exc:
        return int(exc.code or 0), err.getvalue().strip()
    return 0, out.getvalue().strip()


def test_the_worker_is_unhealthy_while_committed_work_stalls(
    tenant: Any, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.factories import OutboxMessageFactory

    settings.WORK_STALLED_AFTER = 120
    assert healthcheck("worker") == (
        0,
        "worker: healthy: 0 item(s) waiting, 0 finished in the last minute",
    )
    OutboxMessageFactory(tenant=tenant, created_at=timezone.now() - timedelta(minutes=10))
    status, line = healthcheck("worker")
    assert status == 1
    assert line.startswith("worker: unhealthy: background work is not completing: 1 item(s)")

    # In a container (Docker without Swarm restarts nothing): stop its main process, once it
    # has run for up's interval between stall restarts. A child stands in for pid 1 here.
    main = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        monkeypatch.setattr(healthcheck_command, "MAIN_PROCESS", main.pid)
        status, line = healthcheck("worker", "--stop-main-process")
        assert status == 1
        assert line.endswith("(at most one restart per 180 s)")
        assert main.poll() is None
        monkeypatch.setattr(healthcheck_command, "STALL_RESTART_EVERY", 0.0)
        assert healthcheck("worker", "--stop-main-process")[0] == 1
        assert main.wait(timeout=10) == -signal.SIGTERM
    finally:
        main.kill()
        main.wait()

    # A backlog that drains, however slowly, is no stall.
    OutboxMessageFactory(tenant=tenant, state="done", finished_at=timezone.now())
    assert healthcheck("worker", "--stop-main-process")[0] == 0


def test_one_beat_holds_the_lock_and_beat_is_healthy_while_its_tasks_complete(
    settings: Any,
) -> None:
    settings.WORK_STALLED_AFTER = 120
    first, second = BeatLock(), BeatLock()
    try:
        assert healthcheck("beat") == (
            1,
            "beat: unhealthy: no beat holds the beat lock: beat is not running against this "
            "database",
        )
        assert first.try_acquire()
        assert not second.try_acquire()  # a second beat is refused while the first runs
        assert first.try_acquire()  # taking it again changes nothing
        assert first.held()
        assert healthcheck("beat")[0] == 0

        scheduled_runs_expect(timezone.now() - timedelta(minutes=5))
        status, line = healthcheck("beat")
        assert status == 1
        assert "relay-outbox (nothing for 300 s, limit 122 s)" in line
        scheduled_run_succeeded("derivations.outbox_relay")
        assert healthcheck("beat")[0] == 0

        # The first beat's session ends (its database restarted): the second takes over, and
        # the first, finding its lock gone to another, must stop rather than send twice.
        first.release()
        # The server releases the lock as the session's backend exits, a moment after.
        deadline = time.monotonic() + 120  # tells a hang from slowness; ends at the takeover
        while not second.try_acquire() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert second.held()
        first.next_check = 0.0
        with pytest.raises(BeatLockLost, match="only one beat may run per database"):
            first.keep()
    finally:
        first.release()
        second.release()


@pytest.fixture
def web_server() -> Iterator[tuple[str, list[str]]]:
    """A server answering 200 on /live and 503 elsewhere; records each request's Host."""
    hosts: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hosts.append(self.headers["Host"])
            self.send_response(200 if self.path == "/live" else 503)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            """Quiet: the test reads what it needs from ``hosts``."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", hosts
    finally:
        server.shutdown()
        server.server_close()


def test_web_is_healthy_while_its_liveness_answers_200(
    web_server: tuple[str, list[str]], settings: Any
) -> None:
    base, hosts = web_server
    settings.ALLOWED_HOSTS = [".memory.example.com", "localhost"]
    assert healthcheck("web", "--url", f"{base}/live") == (
        0,
        f"web: healthy: {base}/live answered 200",
    )
    # The server refuses any Host but those it serves: the check names one of them.
    assert hosts == ["memory.example.com"]
    assert healthcheck("web", "--url", f"{base}/down") == (
        1,
        f"web: unhealthy: {base}/down answered 503",
    )
    status, line = healthcheck("web", "--url", "http://127.0.0.1:9/live")
    assert status == 1
    assert line.startswith("web: unhealthy: http://127.0.0.1:9/live does not answer:")
    # The entry point checks without Django, reading ALLOWED_HOSTS as the settings do.
    assert probe.host_header(["*"]) == "localhost"
    with pytest.MonkeyPatch.context() as env:
        env.setenv("ALLOWED_HOSTS", " memory.example.com ,localhost")
        assert probe.web_main(["--url", f"{base}/live"]) == 0
        env.delenv("ALLOWED_HOSTS")
        assert probe.allowed_hosts() == ["127.0.0.1", "localhost", "[::1]"]
        assert probe.web_main(["--url", f"{base}/down"]) == 1
    assert hosts[2:] == ["memory.example.com", "127.0.0.1"]


def test_the_command_never_starts_the_embedded_database(tmp_path: Path) -> None:
    """As a container's health check runs it: the real entry point, in a new process."""
    env = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "clients" / "python")]),
        "MEMORYCONSOLE_HOME": str(tmp_path / "home"),
    }
    run = [sys.executable, "-m", "memoryconsole.cli", "healthcheck"]
    result = subprocess.run(
        [*run, "worker"], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith("worker: unhealthy: the database is unreachable:")
    assert not (tmp_path / "home").exists(), "the health check prepared an instance"
    web = subprocess.run(
        [*run, "web", "--url", "http://127.0.0.1:9/live"], env=env, capture_output=True, text=True
    )
    assert web.returncode == 1
    assert web.stderr.startswith("web: unhealthy: http://127.0.0.1:9/live does not answer")
    refused = subprocess.run(
        [*run, "beat", "--url", "http://x"], env=env, capture_output=True, text=True, timeout=120
    )
    assert refused.returncode == 2
    assert "--url is for web only" in refused.stderr
