"""``memoryconsole up [--host H] [--port P] [--demo] [--workers N]``: the whole product at once.

What only ``up`` does, in order: checks the database (the embedded PostgreSQL, which the
``memoryconsole`` entry point has started, or the server in ``DATABASE_URL``, which must
offer pgvector), applies migrations as the owner role, proves the application role logs in,
prepares the Celery broker, optionally loads the demo tenant, then starts a Celery worker,
Celery beat and gunicorn under :class:`memoryconsole.supervisor.Supervisor`, waits until
``/api/v1/health`` answers and prints where everything is. Then it watches:

* a child that dies is restarted with backoff; a worker holding committed work without
  finishing any is restarted with beat; the embedded PostgreSQL is started again when it
  stops answering (the API answers 503 meanwhile);
* a reason not to start (server unreachable, no pgvector, port taken, failed migration) is
  one line on stderr and exit status 1, never a traceback;
* Ctrl-C (or SIGTERM) stops every child; the embedded PostgreSQL stops when ``up`` exits
  unless another process (a second ``up``, a shell) still holds it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import FrameType
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser
from django.db import connections

from apps.core.arguments import port_number, positive_int
from memoryconsole import embedded, instance
from memoryconsole.health import STALL_RESTART_EVERY, work_stalled
from memoryconsole.supervisor import STOP_TIMEOUT, Supervisor

# Seconds for the web server to answer its health check. A child that exits ends the wait at
# once, so this only tells a hung server from a slow start: a busy machine has needed more
# than 90 s.
READY_TIMEOUT = 300.0
MIGRATE_TIMEOUT = 600.0
POLL_INTERVAL = 0.25
# The worker's threads, and how many messages each may hold ahead. Embeddings arrive as
# wake-ups, each starting a drain that works through the tenant's queue in batches, so a few
# messages per thread keep every thread busy; the SQL broker is polled only once a second
# while the worker holds all it may, so a worker holding one per thread would leave the relay
# and short tasks waiting behind that poll. Whatever a worker that dies was holding is offered
# again by the outbox relay.
WORKER_THREADS = 4
WORKER_PREFETCH = 4


class UpError(Exception):
    """A reason to stop: printed as one line, exit status 1."""


# How often up reads /api/v1/health and probes the embedded database while running.
WATCH_INTERVAL = 10.0


def _url_host(host: str) -> str:
    """The host to put in a URL for a server bound to ``host`` (wildcards: this machine)."""
    if host in {"", "0.0.0.0"}:  # noqa: S104 - mapping the wildcard, not binding to it
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    # Without a final period: the caller's sentence goes on after it.
    return text.splitlines()[0].rstrip(".") if text else type(exc).__name__


def _sanitize(url: str) -> str:
    from kombu.utils.url import maybe_sanitize_url

    return str(maybe_sanitize_url(url))


def _server_label(entry: dict[str, Any]) -> str:
    host = entry.get("HOST") or "local socket"
    port = entry.get("PORT")
    return f"{host}{':' + str(port) if port else ''}/{entry.get('NAME')}"


def child_commands(
    *, host: str, port: int, workers: int, sql_broker: bool, loglevel: str = "INFO"
) -> dict[str, list[str]]:
    """The command line of each long-running child, by name, in the order up starts them
    (the write benchmark starts the same ones without up, to measure what supervision costs)."""
    python = sys.executable
    worker = [python, "-m", "celery", "-A", "memoryconsole", "worker", "--loglevel", loglevel]
    worker += ["--hostname", f"memoryconsole-{port}@%h"]
    # Threads, not a prefork pool: a pool child killed on its own (the OOM killer's way)
    # left the prefork worker taking messages and never running them; a thread pool
    # dies whole, and up restarts it. Tasks wait on the database and the embedder,
    # which release the GIL, so threads keep the embedder busy.
    worker += ["--pool", "threads", "--concurrency", str(WORKER_THREADS)]
    worker += ["--prefetch-multiplier", str(WORKER_PREFETCH)]
    if sql_broker:
        # The SQL transport has no fan-out: no gossip, mingle or broadcast heartbeats.
        worker += ["--without-gossip", "--without-mingle", "--without-heartbeat"]
    beat = [python, "-m", "celery", "-A", "memoryconsole", "beat", "--loglevel", loglevel]
    web = [python, "-m", "gunicorn", "memoryconsole.wsgi", "--bind", f"{host}:{port}"]
    web += ["--workers", str(workers), "--graceful-timeout", str(int(STOP_TIMEOUT) - 2)]
    web += ["--config", "python:memoryconsole.gunicorn_conf", "--log-level", loglevel.lower()]
    # gunicorn's control socket has one path per user, not per home: two ups would fight.
    web.append("--no-control-socket")
    return {"worker": worker, "beat": beat, "web": web}


def child_env(home: Path, role: str, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a child of up living in ``home``, logging in as ``role``."""
    env = dict(os.environ if base is None else base)
    env["DJANGO_SETTINGS_MODULE"] = "memoryconsole.settings"
    env["MEMORYCONSOLE_HOME"] = str(home)
    env["MEMORYCONSOLE_DB_ROLE"] = role
    env["PYTHONUNBUFFERED"] = "1"
    return env


class Command(BaseCommand):
    help = (
        "Run Memory Console: database, migrations, Celery worker and beat, and the web "
        "server. Ctrl-C stops everything."
    )

    stop_signal: str | None = None  # the first SIGINT/SIGTERM received
    supervisor: Supervisor

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
        parser.add_argument("--port", type=port_number, default=8000, help="port to listen on")
        parser.add_argument("--demo", action="store_true", help="load the demo tenant (idempotent)")
        parser.add_argument(
            "--workers", type=positive_int, default=2, help="gunicorn worker processes (default 2)"
        )

    # --- output -----------------------------------------------------------------------------

    def say(self, message: str) -> None:
        self.stdout.write(message)
        self.stdout.flush()

    def complain(self, message: str) -> None:
        self.stderr.write(f"memoryconsole up: {message}")
        self.stderr.flush()

    # --- signals ----------------------------------------------------------------------------

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self.stop_signal is None:
            # Only a flag: every wait in this command polls it, so no step is interrupted
            # half-way (a child started but not yet recorded, say).
            self.stop_signal = signal.Signals(signum).name
        else:
            self.supervisor.force = True

    def _check_stop(self) -> None:
        if self.stop_signal is not None:
            raise _StopRequested(self.stop_signal)

    # --- the command ------------------------------------------------------------------------

    def handle(
        self, *args: Any, host: str, port: int, demo: bool, workers: int, **options: Any
    ) -> None:
        self.stop_signal = None
        self.supervisor = Supervisor(self._child_env("app"))
        previous = {
            signum: signal.signal(signum, self._on_signal)
            for signum in (signal.SIGINT, signal.SIGTERM)
        }
        status = 0
        try:
            self._up(host=host, port=port, demo=demo, workers=workers)
        except _StopRequested as stop:
            self.say(f"received {stop}, stopping ...")
        except UpError as exc:
            self.complain(str(exc))
            status = 1
        finally:
            started = time.monotonic()
            names = ", ".join(child.name for child in self.supervisor.children)
            self.supervisor.stop_all()
            connections.close_all()
            if names:
                self.say(f"stopped {names} in {time.monotonic() - started:.1f}s")
            if settings.DATABASE_TARGET.embedded:
                # The holders' lock does it as this process exits (memoryconsole.embedded).
                self.say("stopping the embedded PostgreSQL (unless another process uses it)")
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        if status:
            raise SystemExit(status)

    def _up(self, *, host: str, port: int, demo: bool, workers: int) -> None:
        target = settings.DATABASE_TARGET
        self.say(f"Memory Console: starting (home {settings.HOME})")
        if workers < 1:
            raise UpError("--workers must be at least 1")
        self._check_port(host, port)
        if target.embedded:
            database = target.description
        else:
            database = self._check_external_server(target.owner)
        self.say(f"database: {database}")
        self._check_stop()

        self._migrate()
        self._check_application_role()
        self._check_stop()

        broker, sql_broker = self._prepare_broker()
        self.say(f"broker: {broker}")
        if demo:
            self._load_demo()
        self._check_stop()

        # Web workers and the Celery worker count into one directory, so /metrics sums them.
        metrics = instance.metrics_directory_fresh(str(port))
        self.supervisor.env[instance.METRICS_DIRECTORY_ENV] = str(metrics)
        self.say("starting the Celery worker, Celery beat and gunicorn ...")
        loglevel = os.environ.get("LOG_LEVEL", "INFO").upper()
        commands = child_commands(
            host=host, port=port, workers=workers, sql_broker=sql_broker, loglevel=loglevel
        )
        for name, argv in commands.items():
            self.supervisor.start(name, argv)

        base = f"http://{_url_host(host)}:{port}"
        health = self._wait_until_healthy(f"{base}/api/v1/health")
        self._banner(base, database, broker, health, host)

        self._supervise(f"{base}/api/v1/health")

    # --- supervision --------------------------------------------------------------------------

    def _supervise(self, health_url: str) -> None:
        """Until asked to stop: restart a child that dies (with backoff), a worker that holds
        work without finishing any, and the embedded database when it stops answering."""
        next_watch = time.monotonic() + WATCH_INTERVAL
        last_stall_restart = 0.0
        while True:
            self._check_stop()
            now = time.monotonic()
            for child in self.supervisor.children:
                if child.restart_at is None and child.process.poll() is not None:
                    delay = child.backoff()
                    child.restart_at = now + delay
                    self.complain(
                        f"the {child.name} process exited (status {child.process.returncode});"
                        f" restarting it in {delay:.0f}s"
                    )
                elif child.restart_at is not None and now >= child.restart_at:
                    self.supervisor.restart(child)
                    self.say(f"restarted the {child.name} process (pid {child.pid})")
            if now >= next_watch:
                next_watch = now + WATCH_INTERVAL
                self._watch_database()
                if now - last_stall_restart >= STALL_RESTART_EVERY and self._work_stalled(
                    health_url
                ):
                    last_stall_restart = now
                    for name in ("worker", "beat"):
                        stalled = self.supervisor.named(name)
                        if stalled is not None and stalled.restart_at is None:
                            self.supervisor.restart(stalled)
                    self.complain(
                        "background work is not completing (see /api/v1/health); restarted "
                        "the worker and beat"
                    )
            time.sleep(POLL_INTERVAL)

    def _work_stalled(self, health_url: str) -> bool:
        """Committed work has waited past the limit and nothing finished in the last minute.

        A backlog that drains (slowly) is not a stall; a worker that took work and does nothing
        with it is, and so is a relay (beat) that stopped publishing."""
        try:
            with urllib.request.urlopen(health_url, timeout=5) as response:  # noqa: S310
                body: dict[str, Any] = json.loads(response.read())
        except (OSError, ValueError):
            return False  # the web server's own troubles are its restart's business
        work = body.get("work") or {}
        return work_stalled(work.get("oldest_waiting_seconds"), work.get("done_last_minute") or 0)

    def _watch_database(self) -> None:
        """Start the embedded PostgreSQL again if it stopped answering (the web answers 503
        meanwhile); this process then holds it, and stops it on exit."""
        if not settings.DATABASE_TARGET.embedded:
            return
        if embedded.answers(Path(settings.DATABASE_OWNER["HOST"])):
            return
        self.complain("the embedded PostgreSQL does not answer; starting it again")
        try:
            embedded.start(Path(settings.HOME))
        except embedded.EmbeddedServerError as exc:
            self.complain(f"could not start the embedded PostgreSQL: {exc}")
        else:
            self.say("the embedded PostgreSQL is running again")

    # --- steps ------------------------------------------------------------------------------

    def _child_env(self, role: str) -> dict[str, str]:
        return child_env(Path(settings.HOME), role)

    def _check_port(self, host: str, port: int) -> None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        try:
            with socket.socket(family, socket.SOCK_STREAM) as probe:
                # As gunicorn does, so a port in TIME_WAIT is not reported as taken.
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                probe.bind((host, port))
        except OSError as exc:
            raise UpError(
                f"cannot listen on {host}:{port} ({exc.strerror or exc}); "
                "stop what uses it or choose another --port"
            ) from None

    def _check_external_server(self, entry: dict[str, Any]) -> str:
        """Connect as the owner and make sure pgvector is there; return a description."""
        import psycopg

        where = _server_label(entry)
        params: dict[str, Any] = {
            "host": entry.get("HOST") or None,
            "port": entry.get("PORT") or None,
            "user": entry.get("USER") or None,
            "password": entry.get("PASSWORD") or None,
            "dbname": entry.get("NAME") or None,
            "connect_timeout": 5,
            **(entry.get("OPTIONS") or {}),
        }
        self.say(f"checking the PostgreSQL server at {where} (DATABASE_URL) ...")
        try:
            with psycopg.connect(**params, autocommit=True) as conn:
                installed = conn.execute(
                    "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
                ).fetchone()
                available = conn.execute(
                    "SELECT default_version FROM pg_available_extensions WHERE name = 'vector'"
                ).fetchone()
                version = conn.execute("SHOW server_version").fetchone()
        except psycopg.Error as exc:
            raise UpError(
                f"cannot connect to the PostgreSQL server in DATABASE_URL ({where}): "
                f"{_first_line(exc)}. Start that server or fix DATABASE_URL, or unset "
                "DATABASE_URL to use the embedded PostgreSQL."
            ) from None
        server = f"PostgreSQL {version[0].split()[0] if version else '?'} server at {where}"
        if installed is None and available is None:
            raise UpError(
                f"the {server} (DATABASE_URL) lacks pgvector: the 'vector' extension is not "
                "available there. Install pgvector on that server (for example run the "
                "pgvector/pgvector:pg18 image, or install your distribution's pgvector "
                "package), or unset DATABASE_URL to use the embedded PostgreSQL, which "
                "includes it."
            )
        if installed is not None:
            return f"{server} (pgvector {installed[0]})"
        return f"{server} (pgvector {available[0] if available else '?'} available)"

    def _migrate(self) -> None:
        self.say("applying migrations (as the owner role) ...")
        argv = [sys.executable, "-m", "memoryconsole.cli", "migrate", "--no-input"]
        with tempfile.TemporaryFile() as output:
            child = self.supervisor.start(
                "migrate", argv, env=self._child_env("owner"), stdout=output
            )
            deadline = time.monotonic() + MIGRATE_TIMEOUT
            while child.process.poll() is None:
                self._check_stop()
                if time.monotonic() > deadline:
                    raise UpError(f"migrations did not finish within {MIGRATE_TIMEOUT:.0f}s")
                time.sleep(POLL_INTERVAL)
            self.supervisor.children.remove(child)
            output.seek(0)
            text = output.read().decode(errors="replace")
        if child.process.returncode != 0:
            tail = "\n".join(text.strip().splitlines()[-20:])
            self.stderr.write(tail)
            raise UpError(
                f"migrations failed (status {child.process.returncode}); see the output above"
            )
        applied = sum(1 for line in text.splitlines() if line.strip().startswith("Applying "))
        self.say(f"migrations: {applied} applied" if applied else "migrations: up to date")

    def _check_application_role(self) -> None:
        """Web and tasks log in as the application role: prove it can, before starting them."""
        connection = connections["default"]
        try:
            connection.ensure_connection()
        except Exception as exc:
            raise UpError(
                f"the application role {settings.DATABASE_TARGET.app_role!r} cannot log in: "
                f"{_first_line(exc)}. Set DATABASE_APP_URL to its credentials, or let "
                "migrations create it (the DATABASE_URL role needs CREATEROLE)."
            ) from None
        finally:
            connection.close()

    def _prepare_broker(self) -> tuple[str, bool]:
        """Check and prepare the broker; return its label and whether it is the SQL one."""
        from memoryconsole.celery import app, broker_prepare, broker_transport

        url = str(app.conf.broker_url)
        configured = bool(os.environ.get("CELERY_BROKER_URL", "").strip())
        sql_broker = broker_transport(url) in {"sqla", "sqlalchemy"}
        if sql_broker and not configured:
            label = "PostgreSQL (kombu SQL transport, same database)"
        else:
            label = _sanitize(url)
        try:
            broker_prepare()
        except Exception as exc:
            hint = (
                "Start it or fix CELERY_BROKER_URL, or unset CELERY_BROKER_URL to use the "
                "database as the broker."
                if configured
                else "The database answered a moment ago; check its logs."
            )
            raise UpError(
                f"the Celery broker {label} is unreachable: {_first_line(exc)}. {hint}"
            ) from None
        return label, sql_broker

    def _load_demo(self) -> None:
        from memoryconsole.demo import describe, load_demo

        self.say("loading the demo tenant ...")
        try:
            context = load_demo()
        finally:
            connections.close_all()
        for line in describe(context):
            self.say(f"  {line}")

    def _wait_until_healthy(self, url: str) -> dict[str, Any]:
        self.say(f"waiting for {url} ...")
        deadline = time.monotonic() + READY_TIMEOUT
        last_problem = "no answer yet"
        while time.monotonic() < deadline:
            self._check_stop()
            child = self.supervisor.exited()
            if child is not None:
                raise UpError(
                    f"the {child.name} process exited during start-up "
                    f"(status {child.process.returncode}); see its output above"
                )
            try:
                with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310
                    body: dict[str, Any] = json.loads(response.read())
                    return body
            except urllib.error.HTTPError as exc:
                last_problem = f"HTTP {exc.code}"
            except (OSError, ValueError) as exc:
                last_problem = _first_line(exc)
            time.sleep(POLL_INTERVAL)
        raise UpError(
            f"the web server did not become healthy within {READY_TIMEOUT:.0f}s ({last_problem})"
        )

    def _banner(
        self, base: str, database: str, broker: str, health: dict[str, Any], host: str
    ) -> None:
        rows: list[tuple[str, str]] = [
            ("console", f"{base}/console/"),
            ("API docs", f"{base}/api/docs/"),
            ("health", f"{base}/api/v1/health"),
            ("database", f"{database}; pgvector {health.get('vector', '?')}"),
            ("broker", f"{broker}: {health.get('broker', '?')}"),
        ]
        if host in {"", "0.0.0.0", "::"}:  # noqa: S104
            rows.append(("listening", f"on every interface, port {base.rsplit(':', 1)[1]}"))
        lines = ["", "Memory Console is running", *(f"  {k:<9} {v}" for k, v in rows)]
        lines += ["Press Ctrl-C to stop.", ""]
        self.say("\n".join(lines))


class _StopRequested(Exception):
    """SIGINT or SIGTERM arrived; carries the signal's name."""
