"""The one fast path kept: fixed statements prepared on the server (deletion's, the write's).

Django binds parameters on the client (``server_side_binding`` is off: much of the ORM's SQL
is not preparable), so PostgreSQL parses and plans every statement it receives. Deletion's
statement (``apps.derivations.purge``: many CTEs, each table with its row-level security
policy) costs more to plan than to run for one fact. :func:`prepared_cursor` runs it through
psycopg's server-side binding cursor (``psycopg.Cursor``) with ``prepare=True``: the first
execution on a connection prepares it, later ones skip parsing. PostgreSQL would still plan
that statement afresh on every execution (its generic plan's estimate, with ids bound as
arrays of unknown length, exceeds the custom ones'), so the cursor asks for the generic plan,
for its own transaction only (``SET LOCAL plan_cache_mode``): one plan per connection serves
every deletion. The write path's two statements (``apps.records.statements``) are prepared
the same way, leaving the plan to PostgreSQL. The measurements that keep this path are in
docs/performance.md.

The psycopg cursor is wrapped like any Django cursor, so execute wrappers, query logging and
``CaptureQueriesContext`` see these statements too. Row-level security is unaffected: the
policies read ``current_setting`` at execution time, never at planning time.

Parameters are typed by psycopg (``uuid.UUID``, ``datetime``, ``Jsonb``...). A ``str`` is
sent untyped, so PostgreSQL infers it from the column; where it cannot, the statement casts
it. A long list of ids goes as one array literal (:func:`id_array`), cast by the statement
(``%s::uuid[]``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from django.db import connection
from django.db.backends.utils import CursorDebugWrapper, CursorWrapper


class _PreparingCursor(psycopg.Cursor[Any]):
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


@contextmanager
def prepared_cursor(*, generic_plan: bool = True) -> Iterator[Any]:
    """A Django cursor whose statements are prepared on the server and, with
    ``generic_plan``, planned generically for the rest of the transaction (see module
    docs); without it PostgreSQL chooses, as for any prepared statement."""
    if generic_plan:
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL plan_cache_mode = force_generic_plan")
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
