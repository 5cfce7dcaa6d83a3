"""Committed work is done, once, whatever process dies: real processes, bounded in time.

One ``memoryconsole up`` on a fresh embedded database serves a client that keeps writing
(each write retried with its own ``Idempotency-Key`` until acknowledged, as the Python client
does). Meanwhile each process kind is killed in turn with SIGKILL: the Celery worker (a thread
pool: it has no pool children to lose), beat, a web worker, and the PostgreSQL postmaster;
and the worker is frozen (SIGSTOP) long enough for health to say ``degraded``. Afterwards:
every acknowledged write is readable, none is duplicated, every one is embedded within a
bound, health is ``ok`` again, and nothing outlives ``up``.

The relay's redelivery and the stall limit are shortened (environment) so the bound is
seconds, not minutes. ``.ci/run`` runs this module as its own step (``-m faults``).
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.test_up import Up, _assert_nothing_left, _command, _env, _postmaster, running_up

pytestmark = [pytest.mark.slow, pytest.mark.faults]

REDELIVER_AFTER = 10
STALLED_AFTER = 15
EMBEDDED_WITHIN = 120.0


def _call(up: Up, method: str, path: str, token: str, body: Any = None, key: str = "") -> Any:
    request = urllib.request.Request(  # noqa: S310 - http://127.0.0.1
        up.base + path,
        data=json.dumps(body).encode() if body is not None else None,
        method=method,
    )
    request.add_header("Authorization", f"Bearer {token}")
    request.add_header("Content-Type", "application/json")
    if key:
        request.add_header("Idempotency-Key", key)
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
        return response.status, json.loads(response.read())


class Writer(threading.Thread):
    """Writes records until stopped; each is retried with its key until acknowledged."""

    def __init__(self, up: Up, token: str) -> None:
        super().__init__(daemon=True)
        self.up, self.token = up, token
        self.acknowledged: dict[int, str] = {}
        self.retries = 0
        self.halt = threading.Event()

    def run(self) -> None:
        n = 0
        while not self.halt.is_set():
            record_id = self._write(n)
            if record_id is not None:
                self.acknowledged[n] = record_id
                n += 1
            time.sleep(0.05)

    def _write(self, n: int) -> str | None:
        body = {
            "key": "fault.note",
            "subject": f"user:{n}",
            "value": n,
            "content": f"fault suite note {n}",
            "source": {"kind": "interaction", "ref": f"interaction:{n}"},
            # Now: a record's lifetime counts from its observation.
            "observed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "owner": "service:faults",
            "reason": "fault suite",
            "scope": {"domain": "faults"},
            "sensitivity": "internal",
            "retention": {"basis": "contract", "ttl": "P30D"},
        }
        while not self.halt.is_set():
            try:
                status, answer = _call(
                    self.up, "POST", "/api/v1/records", self.token, body, f"w-{n}"
                )
            except (urllib.error.URLError, OSError, ValueError):
                self.retries += 1  # 503 while the database is away, a refused connection...
                time.sleep(0.3)
                continue
            if status in (200, 201):
                return str(answer["id"])
        return None


def _health(up: Up) -> dict[str, Any]:
    try:
        status, body = up.get("/api/v1/health")
    except OSError:
        return {}
    return dict(json.loads(body)) if status == 200 else {}


def _wait(what: str, done: Any, up: Up, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"{what} within {timeout}s:\n{up.output()[-4000:]}"
        assert up.process.poll() is None, f"up exited:\n{up.output()[-4000:]}"
        time.sleep(0.5)


def _child(up: Up, word: str) -> psutil.Process:
    return next(c for c in psutil.Process(up.process.pid).children() if word in c.cmdline())


def _kill_and_recover(up: Up, victim: psutil.Process, writer: Writer) -> None:
    before = len(writer.acknowledged)
    victim.kill()
    _wait("healthy again", lambda: _health(up).get("database") == "ok", up)
    _wait("writes acknowledged again", lambda: len(writer.acknowledged) > before + 3, up)


def test_committed_work_survives_every_process_kind_being_killed(tmp_path: Path) -> None:
    home = tmp_path / "home"
    tuning = {
        "MEMORYCONSOLE_OUTBOX_REDELIVER_AFTER": str(REDELIVER_AFTER),
        "MEMORYCONSOLE_WORK_STALLED_AFTER": str(STALLED_AFTER),
    }
    with running_up(home, tmp_path, workers=2, env=tuning) as up:
        up.wait_healthy()

        def mc(*argv: str) -> str:
            out = subprocess.run(
                [*_command(), *argv], env=_env(home), capture_output=True, text=True, check=True
            )
            return out.stdout.strip().splitlines()[-1]

        mc("create-tenant", "faults")
        # A model the worker embeds after commit, so the worker has queued work to lose or
        # keep, and its freeze shows (the default embeds inside each write: nothing queues).
        mc("reembed", "faults", "--model", "hashing-256")
        token = mc("create-token", "faults", "--name", "writer")
        writer = Writer(up, token)
        writer.start()
        _wait("first writes", lambda: len(writer.acknowledged) > 5, up)

        _kill_and_recover(up, _child(up, "worker"), writer)
        _kill_and_recover(up, _child(up, "beat"), writer)
        gunicorn = _child(up, "gunicorn")
        _kill_and_recover(up, gunicorn.children()[0], writer)
        _kill_and_recover(up, _postmaster(home), writer)

        # A worker that stops working (frozen) is reported, then recovers.
        frozen = _child(up, "worker")
        frozen.send_signal(signal.SIGSTOP)
        _wait("health degraded", lambda: _health(up).get("status") == "degraded", up, 90)
        frozen.send_signal(signal.SIGCONT)

        writer.halt.set()
        writer.join(30)
        acknowledged = dict(writer.acknowledged)
        assert len(acknowledged) > 20
        assert writer.retries > 0, "the kills reached the writer (503s, refused connections)"
        print(f"{len(acknowledged)} writes acknowledged, {writer.retries} retries")

        _wait(
            "every acknowledged write embedded",
            lambda: _health(up).get("work", {}).get("waiting") == 0,
            up,
            EMBEDDED_WITHIN,
        )
        for n, record_id in acknowledged.items():
            status, record = _call(up, "GET", f"/api/v1/records/{record_id}", token)
            assert status == 200
            assert record["value"] == n
            assert record["derived"]["embeddings"], f"record {n} has no embedding"
        listed = 0
        cursor_path = "/api/v1/records?key=fault.note"
        while cursor_path:
            _, page = _call(up, "GET", cursor_path, token)
            listed += len(page["results"])
            cursor_path = page["next"].split(up.base, 1)[-1] if page.get("next") else ""
        assert listed == len(acknowledged), "a retried write was stored twice"
        _wait("health ok", lambda: _health(up).get("status") == "ok", up, 60)
        assert up.interrupt() == 0
    _assert_nothing_left(home, up)
