"""Rows inserted as parts of one larger statement.

The write path sends a new version, its first observation, the fact's new pointer, the
embedding work and the audit event to PostgreSQL as one statement (data-modifying ``WITH``
clauses), so a write costs two round trips instead of eight. The INSERT of each row is
still rendered by Django's own insert compiler, from the model: every column, default and
value conversion is the one ``Model.objects.create`` would use. The SQL text depends on the
model only, so it is compiled once per model; each row then only converts its values (and
the text stays identical, which lets the statement be prepared on the server).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from django.db import connection
from django.db.models import Field, Model
from django.db.models.sql import InsertQuery

Statement = tuple[str, list[Any]]


def _fields(model: type[Model]) -> list[Field[Any, Any]]:
    return [f for f in model._meta.local_concrete_fields if not f.generated]


@cache
def _insert_sql(model: type[Model]) -> str:
    """The INSERT text for one row of ``model``; placeholders only (no value is inlined),
    as the compiler renders a row whose values are all plain parameters."""
    fields = _fields(model)
    query = InsertQuery(model)
    query.insert_values(fields, [model()])
    [(sql, _)] = query.get_compiler(connection=connection).as_sql()
    return str(sql)


def insert_statement(instance: Model) -> Statement:
    """``INSERT INTO <table> (...) VALUES (...)`` for ``instance``, with its parameters.

    Generated columns are left to the database. The instance is marked saved: the caller
    runs the statement in its transaction, and a failure rolls the whole write back.
    """
    model = type(instance)
    params = []
    for field in _fields(model):
        value = field.pre_save(instance, add=True)
        if hasattr(value, "resolve_expression"):
            raise TypeError(f"{model.__name__}.{field.name}: expressions are not inserted here")
        params.append(field.get_db_prep_save(value, connection))
    instance._state.adding = False
    instance._state.db = connection.alias
    return _insert_sql(model), params
