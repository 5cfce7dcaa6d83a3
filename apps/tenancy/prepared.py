"""Cursors for the deletion statements, and id lists as one parameter.

:func:`prepared_cursor` is Django's own cursor (execute wrappers, query logging and
``CaptureQueriesContext`` see every statement); parameters are bound on the client, as for
the ORM. A long list of ids goes as one array literal (:func:`id_array`), cast by the
statement (``%s::uuid[]``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connection


@contextmanager
def prepared_cursor() -> Iterator[Any]:
    """A Django cursor for the deletion statements (see module docs)."""
    with connection.cursor() as cursor:
        yield cursor


def id_array(ids: Iterable[Any]) -> str:
    """``ids`` (UUIDs, or their text) as one PostgreSQL array literal, ``{id,id,...}``, for a
    statement to cast (``%s::uuid[]``).

    psycopg adapts a list element by element in Python, which shows in an erasure batch
    (thousands of ids, eight such lists a batch; docs/performance.md); the literal is one
    join. A UUID's text is hex digits and hyphens, so nothing in it needs quoting, and the
    cast rejects anything else."""
    return "{" + ",".join(map(str, ids)) + "}"
