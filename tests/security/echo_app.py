"""A WSGI app that answers 200 to anything: lets a test read gunicorn's access log alone."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any


def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"ok"]
