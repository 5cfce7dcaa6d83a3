"""Server-side prepared statements for the hottest fixed statements.

Django binds parameters on the client (``server_side_binding`` is off: much of the ORM's SQL
is not preparable), so PostgreSQL parses and plans every statement it receives. The write
path's few statements are fixed texts run thousands of times a minute; planning the write's
one multi-CTE statement costs about as much as executing it. :func:`prepared_cursor` runs
such statements through psycopg's server-side binding with ``prepare=True``: the first
execution on a connection prepares the statement, later ones skip parsing and planning.

Skipping the planning takes :func:`plan_generically`: PostgreSQL's default keeps planning a
prepared statement afresh on every execution when its generic plan's estimate exceeds that of
the custom ones, and the deletion statement (ids bound as arrays of unknown length) always
fell on that side, planned anew for every deleted fact, at nearly twice the cost of running
it with one plan (docs/performance.md). Each statement prepared here is fixed in shape, reads
the tenant at run time and finds its rows by key, so one plan per connection serves every
execution.

The cursor is wrapped like any Django cursor, so execute wrappers, query logging and
``CaptureQueriesContext`` see these statements too. Row-level security is unaffected: the
policies read ``current_setting`` at execution time, never at planning time.

Parameters are typed by psycopg (``uuid.UUID``, ``datetime``, ``Jsonb``...). A ``str`` is
sent untyped, so PostgreSQL infers it from the column; where it cannot (the output list of an
``INSERT ... SELECT``), the statement casts it. A long list of ids goes as one array literal
(:func:`id_array`), cast by the statement (``%s::uuid[]``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connection
from django.db.backends.postgresql.base import (  # type: ignore[attr-defined]
    ServerBindingCursor,
)
from django.db.backends.utils import CursorDebugWrapper, CursorWrapper


class _PreparingCursor(ServerBindingCursor):  # type: ignore[misc]
    def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
        kwargs.setdefault("prepare", True)
        return super().execute(query, params, **kwargs)


class _DebugWrapper(CursorDebugWrapper):
    """Logs the statement as written (``%s`` placeholders, parameters beside it): Django's
    own wrapper asks psycopg for the last query sent, which a prepared execution leaves
    unset."""

    def execute(self, sql: Any, params: Any = None) -> Any:
        with self.debug_sql(sql, params):
            return CursorWrapper.execute(self, sql, params)


def plan_generically(sender: Any, connection: Any, **kwargs: Any) -> None:
    """``connection_created`` receiver: statements prepared on this connection are planned
    once, generically (see module docs). It runs before the connection's first transaction,
    so the setting holds for the whole session; the ORM's statements, never prepared, are
    planned with their values as before."""
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute("SET plan_cache_mode = force_generic_plan")


@contextmanager
def prepared_cursor() -> Iterator[Any]:
    """A Django cursor whose statements are prepared on the server (see module docs)."""
    connection.ensure_connection()
    connection.validate_thread_sharing()
    raw = _PreparingCursor(connection.connection)
    cursor = (
        _DebugWrapper(raw, connection)
        if connection.queries_logged
        else CursorWrapper(raw, connection)
    )
    try:
        yield cursor
    finally:
        cursor.close()


def id_array(ids: Iterable[Any]) -> str:
    """``ids`` (UUIDs, or their text) as one PostgreSQL array literal, ``{id,id,...}``, for a
    statement to cast (``%s::uuid[]``).

    psycopg adapts a list element by element in Python, which shows in an erasure batch
    (thousands of ids, eight such lists a batch; docs/performance.md); the literal is one
    join. A UUID's text is hex digits and hyphens, so nothing in it needs quoting, and the
    cast rejects anything else."""
    return "{" + ",".join(map(str, ids)) + "}"
