"""What the application role may do: DML on every table, never DDL, never TRUNCATE.

Run after every ``migrate`` (as the owner). Append-only tables (models with
``append_only = True``) get INSERT and SELECT only, so the application cannot rewrite history.
"""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.conf import settings
from django.db import connections
from psycopg import sql


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
        if cursor.fetchone() is None:
            try:
                cursor.execute(
                    sql.SQL(
                        "CREATE ROLE {} LOGIN PASSWORD {} NOSUPERUSER NOCREATEDB "
                        "NOCREATEROLE NOBYPASSRLS"
                    )
                    .format(sql.Identifier(role), sql.Literal(app.get("PASSWORD") or None))
                    .as_string(cursor.connection)
                )
            except Exception as exc:
                raise ApplicationRoleError(
                    f"The application role {role!r} does not exist and the migrating role "
                    "cannot create it. Create it as a superuser (LOGIN NOSUPERUSER NOBYPASSRLS) "
                    "or set DATABASE_APP_URL to an existing role."
                ) from exc
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
