"""A connection as the database's owner role, for the statements the application role may
not run (``VACUUM``, ``REINDEX``: reclamation and tenant indexes)."""

from __future__ import annotations

from typing import Any

import psycopg
from django.conf import settings
from django.db import connection


def owner_connection() -> Any:
    owner = settings.DATABASE_OWNER
    return psycopg.connect(
        host=owner.get("HOST") or None,
        port=owner.get("PORT") or None,
        user=owner["USER"],
        password=owner.get("PASSWORD") or None,
        # The database this process uses (the test database under pytest).
        dbname=connection.settings_dict["NAME"],
        autocommit=True,
    )
