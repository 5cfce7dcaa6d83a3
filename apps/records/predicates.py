"""The records' domain predicates (``MemoryRecordQuerySet``) inside hand-written SQL.

Search and the evaluation's change report are single statements written by hand; where they
need "live", "current" or "held", they take the clause Django compiles from the queryset
method, so the predicate is defined once, in the ORM.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from enum import Enum
from functools import cache
from typing import Any

from django.db import connection

from .models import MemoryRecord, MemoryRecordQuerySet

# Stands in for the statement's ``now`` while a predicate is compiled.
_NOW = datetime(2000, 1, 1, tzinfo=UTC)

PREDICATES: dict[str, Callable[[], MemoryRecordQuerySet]] = {
    "live": lambda: MemoryRecord.objects.live(_NOW),
    "expired": lambda: MemoryRecord.objects.expired(_NOW),
    "current": lambda: MemoryRecord.objects.current(),
    "held": lambda: MemoryRecord.objects.held(),
}


@cache
def _compiled(name: str) -> tuple[str, tuple[Any, ...]]:
    """The WHERE clause of ``PREDICATES[name]`` as Django compiles it, the record table's
    name left as ``{r}``, each parameter as ``%(p_<name>_<n>)s`` (``now`` as ``%(now)s``),
    and the parameters' values."""
    sql, values = PREDICATES[name]().values("id").query.sql_with_params()
    table = connection.ops.quote_name(MemoryRecord._meta.db_table)
    select, found, where = sql.partition(f" FROM {table} WHERE ")
    pieces = where.split("%s")
    if not (select.startswith("SELECT ") and found) or len(pieces) != len(values) + 1:
        raise ValueError(f"The {name} predicate compiled to an unexpected statement.")
    clause = pieces[0]
    constants: list[Any] = []
    for value, piece in zip(values, pieces[1:], strict=True):
        if value == _NOW:
            clause += "%(now)s"
        else:
            clause += f"%(p_{name}_{len(constants)})s"
            # Plain values (a choice's text, not its enum): statements are also kept apart
            # from Django, as the retrieval benchmark's clients replay them.
            constants.append(value.value if isinstance(value, Enum) else value)
        clause += piece
    clause = clause.replace("{", "{{").replace("}", "}}").replace(f"{table}.", "{r}.")
    return clause, tuple(constants)


def record_predicate_sql(name: str, alias: str, params: dict[str, Any]) -> str:
    """``MemoryRecord.objects.<name>()`` (``live`` and ``expired`` at the statement's
    ``%(now)s``) as a condition on the record alias ``alias`` of a statement with named
    parameters; its parameters are added to ``params``."""
    clause, constants = _compiled(name)
    params.update({f"p_{name}_{n}": value for n, value in enumerate(constants)})
    return f"({clause.format(r=alias)})"
