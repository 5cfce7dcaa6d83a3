"""The write path's one fast path: a new version's rows inserted as parts of one statement.

A new version, its first observation, its conflict (if any), the fact's new pointers, the
embedding work and the audit event reach PostgreSQL as one statement (data-modifying
``WITH`` clauses, :func:`apps.audit.services.audit_append`): a write costs two round trips
instead of seven. Written with the ORM, one statement per row, the write's ratio to raw
INSERTs of the same rows was more than 1.5 times this one's (docs/performance.md), so this
one path stays. A record's deletion uses it too, for its receipt and the erasure ledger's
entry beside its audit event (two round trips of a delete's twelve); every other change saves
through the ORM.

Each row's INSERT is rendered from the model's public field API: every concrete,
non-generated field's column, and the value its ``pre_save`` and ``get_db_prep_save`` give,
as ``Model.save`` would insert it. ``tests/records/test_write_path.py`` checks that the rows
stored this way are the rows ``save`` stores. The instances stay unsaved; :func:`stored`
gives the saved instance once the statement ran.
"""

from __future__ import annotations

from functools import cache
from typing import Any, TypeVar

from django.db import connection
from django.db.models import Field, GeneratedField, Model

Statement = tuple[str, list[Any]]
M = TypeVar("M", bound=Model)


@cache
def _fields(model: type[Model]) -> tuple[Field[Any, Any], ...]:
    return tuple(
        f
        for f in model._meta.get_fields()
        if isinstance(f, Field) and f.concrete and not f.many_to_many
        if not isinstance(f, GeneratedField)
    )


@cache
def _insert_sql(model: type[Model]) -> str:
    quote = connection.ops.quote_name
    fields = _fields(model)
    columns = ", ".join(quote(f.column) for f in fields)
    values = ", ".join(["%s"] * len(fields))
    return f"INSERT INTO {quote(model._meta.db_table)} ({columns}) VALUES ({values})"  # noqa: S608 (model columns)


def insert_statement(instance: Model) -> Statement:
    """``INSERT INTO <table> (...) VALUES (...)`` for the unsaved ``instance``, with its
    parameters: the caller runs it inside its transaction, alongside the write's audit
    event."""
    model = type(instance)
    params = []
    for field in _fields(model):
        value = field.pre_save(instance, add=True)
        if hasattr(value, "resolve_expression"):
            raise TypeError(f"{model.__name__}.{field.name}: expressions are not inserted here")
        params.append(field.get_db_prep_save(value, connection))
    return _insert_sql(model), params


def stored(instance: M) -> M:
    """``instance`` as saved, after its :func:`insert_statement` ran: the same values,
    loaded as the ORM loads a row (``Model.from_db``; a generated column deferred)."""
    model = type(instance)
    names = [f.attname for f in _fields(model)]
    return model.from_db(connection.alias, names, [getattr(instance, n) for n in names])
