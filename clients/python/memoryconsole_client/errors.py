"""Exceptions raised by the client: one class per kind of answer an agent handles differently.

Every API error carries the RFC 9457 problem fields the server sent (``status``, ``title``,
``detail``, ``type``, and ``errors`` for validation failures) and the whole ``body``: a refused
obligation commit (``409``), for instance, carries the committed obligation beside them.
"""

from __future__ import annotations

from typing import Any


class MemoryConsoleError(Exception):
    """Base class of everything this client raises."""


class TransportError(MemoryConsoleError):
    """The server could not be reached (or kept failing) after every retry."""


class ApiError(MemoryConsoleError):
    """The server answered with an error status and a problem document."""

    def __init__(self, status: int, body: Any, *, method: str = "", path: str = "") -> None:
        problem = body if isinstance(body, dict) else {}
        self.status = status
        self.body = body
        self.type = str(problem.get("type", "about:blank"))
        self.title = str(problem.get("title", ""))
        self.detail = str(problem.get("detail", "") or (body if isinstance(body, str) else ""))
        raw_errors = problem.get("errors")
        self.errors: dict[str, list[str]] = raw_errors if isinstance(raw_errors, dict) else {}
        self.method = method
        self.path = path
        where = f"{method} {path}: " if method else ""
        super().__init__(f"{where}{status} {self.title}: {self.detail}".rstrip(": "))


class BadRequest(ApiError):
    """400: malformed or invalid input; ``errors`` names each field path."""


class Unauthorized(ApiError):
    """401: no, bad or revoked token."""


class Forbidden(ApiError):
    """403: the credential lacks the action this call needs."""


class NotFound(ApiError):
    """404: no such object in the credential's tenant (another tenant's looks the same)."""


class Conflict(ApiError):
    """409: the state forbids it (an obligation already committed, a checkpoint behind the
    latest, a closed run...). ``body`` holds what the server returned with it."""


class Gone(ApiError):
    """410: a retry (the same ``Idempotency-Key`` and body) of a request that succeeded, whose
    result has since been deleted or has expired. Nothing was done again. ``id`` names what
    the first response described, ``state`` is ``deleted`` or ``expired``, ``first_status``
    the status the first request was answered with."""

    def __init__(self, status: int, body: Any, *, method: str = "", path: str = "") -> None:
        super().__init__(status, body, method=method, path=path)
        problem = body if isinstance(body, dict) else {}
        self.id = str(problem.get("id", ""))
        self.state = str(problem.get("state", ""))
        first = problem.get("first_status")
        self.first_status = first if isinstance(first, int) else None


class Unprocessable(ApiError):
    """422: a request valid by itself that names what the tenant does not have (a summary's
    source, an obligation's dependency, a part of a record's value, an open run for session
    retention, an unrevoked consent), each named under ``errors`` (the API's one rule for an
    unresolved reference in a body); or the same ``Idempotency-Key`` sent before with a
    different body."""


class RateLimited(ApiError):
    """429: too many requests (or failed authentications) from this client."""


class ServerError(ApiError):
    """5xx that persisted through every retry."""


_BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    422: Unprocessable,
    429: RateLimited,
}


def error_for(status: int, body: Any, *, method: str = "", path: str = "") -> ApiError:
    """The exception for an error answer."""
    cls = _BY_STATUS.get(status, ServerError if status >= 500 else ApiError)
    return cls(status, body, method=method, path=path)
