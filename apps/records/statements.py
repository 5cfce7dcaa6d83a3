"""Rows inserted as parts of one larger statement.

The write path sends a new version, its first observation, the fact's new pointer, the
embedding work and the audit event to PostgreSQL as one statement (data-modifying ``WITH``
clauses), so a write costs two round trips instead of eight. The INSERT of each row is
still rendered by Django's own insert compiler, from the model: every column, default and
value conversion is the one ``Model.objects.create`` would use.
"""

from __future__ import annotations

from typing import Any

from django.db import connection
from django.db.models import Model
from django.db.models.sql import InsertQuery

Statement = tuple[str, list[Any]]


def insert_statement(instance: Model) -> Statement:
    """``INSERT INTO <table> (...) VALUES (...)`` for ``instance``, with its parameters.

    Generated columns are left to the database. The instance is marked saved: the caller
    runs the statement in its transaction, and a failure rolls the whole write back.
    """
    meta = instance._meta
    fields = [f for f in meta.local_concrete_fields if not f.generated]
    query = InsertQuery(type(instance))
    query.insert_values(fields, [instance])
    [(sql, params)] = query.get_compiler(connection=connection).as_sql()
    instance._state.adding = False
    instance._state.db = connection.alias
    return sql, list(params)
