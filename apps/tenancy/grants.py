"""What the application role may do: DML on every table, never DDL, never TRUNCATE.

Run after every ``migrate`` (as the owner). Append-only tables (models with
``append_only = True``) get INSERT and SELECT only, so the application cannot rewrite history.

The role is created when missing, and its password set to the configured one when that no
longer logs in: installs whose password was derived from ``SECRET_KEY`` (before it was
generated once, see :mod:`memoryconsole.instance`) thus keep working after the next
``migrate`` (``up`` runs it first), and so does a rotated ``DATABASE_APP_URL`` password.
"""

from __future__ import annotations

from typing import Any

import psycopg
from django.apps import apps
from django.conf import settings
from django.db import connections
from psycopg import sql

# Database OPTIONS that Django reads itself rather than passing to libpq.
DJANGO_ONLY_OPTIONS = frozenset(
    {"pool", "server_side_binding", "isolation_level", "assume_role", "prepare_threshold"}
)


class ApplicationRoleError(RuntimeError):
    """The owner cannot create or grant the application role."""


def append_only_tables() -> list[str]:
    return sorted(m._meta.db_table for m in apps.get_models() if getattr(m, "append_only", False))


def grant_application_role(sender: Any = None, using: str = "default", **kwargs: Any) -> None:
    # Only the last app's signal needs to act; each call is idempotent and cheap anyway.
    if getattr(sender, "label", None) != "tenancy":
        return
    connection = connections[using]
    app = settings.DATABASE_APP
    role = str(app["USER"])
    if connection.settings_dict.get("USER") == role:
        return  # migrating as the application role (misconfiguration caught by the catalog test)
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [role])
        statement, failure = None, ""
        if cursor.fetchone() is None:
            statement = (
                "CREATE ROLE {} LOGIN PASSWORD {} NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS"
            )
            failure = (
                "does not exist and the migrating role cannot create it. Create it as a "
                "superuser (LOGIN NOSUPERUSER NOBYPASSRLS) or set DATABASE_APP_URL to an "
                "existing role."
            )
        elif app.get("PASSWORD") and not application_role_logs_in(connection.settings_dict, app):
            statement = "ALTER ROLE {} PASSWORD {}"
            failure = (
                "does not log in with its configured password and the migrating role cannot "
                "set it. Set it as a superuser (ALTER ROLE ... PASSWORD) or fix DATABASE_APP_URL."
            )
        if statement is not None:
            password = sql.Literal(app.get("PASSWORD") or None)
            try:
                cursor.execute(
                    sql.SQL(statement)
                    .format(sql.Identifier(role), password)
                    .as_string(cursor.connection)
                )
            except Exception as exc:
                raise ApplicationRoleError(f"The application role {role!r} {failure}") from exc
        ident = sql.Identifier(role).as_string(cursor.connection)
        cursor.execute(f"GRANT USAGE ON SCHEMA public TO {ident}")
        cursor.execute(
            f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {ident}"
        )
        cursor.execute(f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {ident}")
        cursor.execute(f"REVOKE TRUNCATE ON ALL TABLES IN SCHEMA public FROM {ident}")
        for table in append_only_tables():
            quoted = sql.Identifier(table).as_string(cursor.connection)
            cursor.execute(f"REVOKE UPDATE, DELETE ON {quoted} FROM {ident}")


def application_role_logs_in(migrating: dict[str, Any], app: dict[str, Any]) -> bool:
    """Whether the application role logs in with its configured password, to the database
    being migrated, on the server of the migrating connection."""
    options = {
        key: value
        for key, value in (app.get("OPTIONS") or {}).items()
        if key not in DJANGO_ONLY_OPTIONS
    }
    try:
        with psycopg.connect(
            **options,
            host=migrating.get("HOST") or None,
            port=migrating.get("PORT") or None,
            dbname=migrating.get("NAME"),
            user=app["USER"],
            password=app.get("PASSWORD") or None,
            connect_timeout=10,
        ):
            return True
    except psycopg.OperationalError:
        return False
