"""A connection as the database's owner role, for the statements the application role may
not run (``VACUUM``, ``REINDEX``: reclamation and tenant indexes), and the lock that keeps
those runs from overlapping; ids as one array literal, and a row's ``INSERT`` as a clause of
a larger statement (each a round trip or a Python loop fewer on a hot path)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import psycopg
from django.conf import settings
from django.db import connection, models
from psycopg import sql


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


# Index and table maintenance (a tenant index build, reclamation's rebuilds and vacuum, the
# daily rewrite) holds this session-level advisory lock on its owner connection. Overlapping,
# they would queue on the same table locks (a concurrent build waiting out a VACUUM FULL)
# while holding a worker thread each, or do one rebuild twice. Beat's lock is (0x4D43, 1)
# (memoryconsole/beat.py).
MAINTENANCE_LOCK = (0x4D43, 2)


class MaintenanceBusy(Exception):
    """Other maintenance holds the lock: a scheduled run skips its turn (the next one comes)."""


def maintenance_lock(owner: Any, *, wait: bool, what: str) -> None:
    """Take the maintenance lock on ``owner`` (released when that connection closes). With
    ``wait`` false, raise :class:`MaintenanceBusy` when other maintenance holds it."""
    if wait:
        owner.execute("SELECT pg_advisory_lock(%s, %s)", MAINTENANCE_LOCK)
        return
    row = owner.execute("SELECT pg_try_advisory_lock(%s, %s)", MAINTENANCE_LOCK).fetchone()
    if not row[0]:
        raise MaintenanceBusy(
            f"{what}: skipped, other index or table maintenance is running (a tenant index "
            "build, a reclamation or a rewrite); the next scheduled run does it"
        )


def id_array(ids: Iterable[Any]) -> str:
    """``ids`` (UUIDs or integers, or their text) as one PostgreSQL array literal,
    ``{id,id,...}``, for a statement to cast (``%s::uuid[]``).

    psycopg adapts a list element by element in Python, which shows in an erasure batch
    (thousands of ids, eight such lists a batch; docs/performance.md); the literal is one
    join. A UUID's or an integer's text holds nothing that needs quoting, and the cast
    rejects anything else."""
    return "{" + ",".join(map(str, ids)) + "}"


def insert_clause(instance: models.Model) -> tuple[str, list[Any]]:
    """``instance`` as an ``INSERT`` of its concrete fields and their values as the ORM's
    ``save()`` would send them (each field's ``pre_save`` and ``get_db_prep_save``), for a
    caller that runs it as one clause of a larger statement: a record's deletion stores its
    receipt and ledger entry in its audit event's statement
    (:func:`apps.audit.services.audit_append`), one round trip instead of three.

    Every field must hold a value (an expression, a database default among them, is refused).
    No signals are sent, and the primary key must be set by its default (a UUID): nothing is
    read back. Afterwards the instance counts as saved. Held equal to ``save()`` by
    ``tests/core/test_insert_clause.py``."""
    meta = instance._meta
    if instance.pk is None:
        raise ValueError(f"{meta.label}: insert_clause needs a primary key set before the insert")
    columns: list[sql.Identifier] = []
    params: list[Any] = []
    for field in meta.concrete_fields:
        value = field.pre_save(instance, True)
        if hasattr(value, "resolve_expression"):
            # A database default or an expression: save() compiles it, a parameter cannot.
            raise ValueError(f"{meta.label}.{field.name}: an expression, not a value; save() it")
        columns.append(sql.Identifier(field.column))
        params.append(field.get_db_prep_save(value, connection))
    statement = (
        sql.SQL("INSERT INTO {} ({}) VALUES ({})")
        .format(
            sql.Identifier(meta.db_table),
            sql.SQL(", ").join(columns),
            sql.SQL(", ").join([sql.Placeholder()] * len(columns)),
        )
        .as_string()
    )
    instance._state.adding = False
    instance._state.db = connection.alias
    return statement, params
