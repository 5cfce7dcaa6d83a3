"""A connection as the database's owner role, for the statements the application role may
not run (``VACUUM``, ``REINDEX``: reclamation and tenant indexes)."""

from __future__ import annotations

from typing import Any

import psycopg
from django.conf import settings
from django.db import connection


def role_connection(role: dict[str, Any]) -> Any:
    """An autocommit connection as ``role`` (``settings.DATABASE_OWNER`` or ``DATABASE_APP``)
    to the database this process uses (the test database under pytest)."""
    return psycopg.connect(
        host=role.get("HOST") or None,
        port=role.get("PORT") or None,
        user=role["USER"],
        password=role.get("PASSWORD") or None,
        dbname=connection.settings_dict["NAME"],
        autocommit=True,
    )


def owner_connection() -> Any:
    return role_connection(settings.DATABASE_OWNER)
