"""A WSGI application that answers every request with a constant JSON body: no Django, no
database. ``benchmarks/peers.py`` serves it with the product's gunicorn settings beside the
product, so that what HTTP itself costs a request (the connection, gunicorn's parsing, the
client) is measured on the same machine in the same run."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

# About the size of GET /api/v1/me's answer.
BODY = (
    b'{"id": "00000000-0000-0000-0000-000000000000", "name": "bench", "tenant": "peers-t00", '
    b'"actions": ["read", "write", "search", "delete"], "sees_restricted": true, '
    b'"embedded_database": true}'
)


def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    start_response(
        "200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(BODY)))]
    )
    return [BODY]
