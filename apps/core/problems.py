"""Every API error is ``application/problem+json`` (RFC 9457), mapped here in one place.

``type``, ``title``, ``status``, ``detail``; validation failures add ``errors``:
``{field_path: [message, ...]}``. A :class:`~apps.core.errors.DomainError` carries its own
status, type and members; DRF's and Django's errors are translated here too: the DRF exception
handler (``EXCEPTION_HANDLER``) and the Django error handlers for ``/api/`` paths.
:mod:`apps.api.schema` documents these responses in OpenAPI.

This module is imported while DRF builds ``APIView`` (through the API's parser), so it must
not import DRF's views, generics or drf-spectacular's schema machinery.
"""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import Any

import psycopg
from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig, SuspiciousOperation
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import DataError, InterfaceError, OperationalError, connections
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse, UnreadablePostError
from django.views.defaults import bad_request, page_not_found, permission_denied, server_error
from rest_framework import exceptions, status
from rest_framework.pagination import CursorPagination
from rest_framework.response import Response

from .errors import DomainError

logger = logging.getLogger(__name__)

PROBLEM_CONTENT_TYPE = "application/problem+json"
TYPE_BASE = "https://memoryconsole.dev/problems/"

# status: (title, the last part of the type's URL)
KINDS = {
    400: ("Bad request", "validation-error"),
    401: ("Not authenticated", "not-authenticated"),
    403: ("Forbidden", "forbidden"),
    404: ("Not found", "not-found"),
    405: ("Method not allowed", "method-not-allowed"),
    406: ("Not acceptable", "not-acceptable"),
    409: ("Conflict", "conflict"),
    413: ("Payload too large", "payload-too-large"),
    414: ("URI too long", "uri-too-long"),
    415: ("Unsupported media type", "unsupported-media-type"),
    422: ("Unprocessable content", "unprocessable"),
    429: ("Too many requests", "throttled"),
    431: ("Request header fields too large", "header-fields-too-large"),
    500: ("Internal server error", "server-error"),
    503: ("Service unavailable", "unavailable"),
}

INVALID_FIELDS = "The request has invalid fields."
SERVER_ERROR = "An unexpected error occurred; it has been logged."


# What a client should wait before retrying while the database is away.
DATABASE_RETRY_AFTER = 5
DATABASE_UNAVAILABLE = "The database is unavailable; nothing was changed. Retry shortly."


# A request whose statement ran past the request's statement timeout, or gave up waiting for
# a lock: it is rolled back, and the same request may well succeed once the lock is released.
DATABASE_TIMED_OUT = (
    "The request ran out of time waiting for the database (a lock held by other work, or a "
    "slow statement); it was rolled back and nothing was changed. Retry shortly."
)


def database_unavailable(error: BaseException) -> bool:
    """Whether ``error`` means the database cannot serve the request now (a connection refused
    or lost, the server restarting, a statement cancelled by the request's timeout): a
    condition to retry, not a fault of the request."""
    return isinstance(error, OperationalError | InterfaceError)


def database_timed_out(error: BaseException) -> bool:
    """Whether ``error`` is a statement cancelled by ``statement_timeout`` (or another
    cancellation) or a lock not granted within ``lock_timeout``."""
    cause = error if isinstance(error, psycopg.Error) else error.__cause__
    return isinstance(cause, psycopg.errors.QueryCanceled | psycopg.errors.LockNotAvailable)


def database_unavailable_body(error: BaseException) -> dict[str, Any]:
    """The 503 problem for ``error`` (see :func:`database_unavailable`), and its log line: one
    line, no traceback, nothing of the statement (it may quote what the request held)."""
    if database_timed_out(error):
        cause = error if isinstance(error, psycopg.Error) else error.__cause__
        logger.warning("request ran out of time in the database: %s", type(cause).__name__)
        return problem_body(503, DATABASE_TIMED_OUT, slug="database-timeout")
    logger.warning("database unavailable: %s", type(error).__name__)
    return problem_body(503, DATABASE_UNAVAILABLE, slug="database-unavailable")


def _title(status_code: int) -> str:
    if status_code in KINDS:
        return KINDS[status_code][0]
    try:
        return HTTPStatus(status_code).phrase
    except ValueError:
        return "Error"


def problem_body(
    status_code: int,
    detail: str,
    *,
    slug: str | None = None,
    errors: dict[str, list[str]] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "type": TYPE_BASE + (slug or KINDS.get(status_code, ("", "error"))[1]),
        "title": _title(status_code),
        "status": status_code,
        "detail": detail,
    }
    if errors:
        body["errors"] = errors
    if extra:
        body.update(extra)
    return body


def flatten_errors(detail: Any, prefix: str = "") -> dict[str, list[str]]:
    """DRF's nested error structure as ``{"source.kind": ["..."]}``."""
    out: dict[str, list[str]] = {}
    if isinstance(detail, dict):
        for key, value in detail.items():
            if isinstance(key, int):  # ListField/DictField children: errors keyed by index
                path = f"{prefix}[{key}]"
            elif key == "non_field_errors":
                # An object's own errors (not an object, a rule across its members) belong
                # to the object: its path, or "body" for the whole request.
                path = prefix or "body"
            elif str(key).startswith("[") or not prefix:
                path = f"{prefix}{key}"  # "[0]" inside a value, or a top-level member
            else:
                path = f"{prefix}.{key}"
            for sub_path, messages in flatten_errors(value, path).items():
                out.setdefault(sub_path, []).extend(messages)
    elif isinstance(detail, list):
        if all(not isinstance(item, dict | list) for item in detail):
            out[prefix or "body"] = [str(item) for item in detail]
        else:
            for index, item in enumerate(detail):
                path = f"{prefix}[{index}]" if prefix else f"[{index}]"
                for sub_path, messages in flatten_errors(item, path).items():
                    out.setdefault(sub_path, []).extend(messages)
    else:
        out[prefix or "body"] = [str(detail)]
    return out


def _response(body: dict[str, Any], headers: dict[str, str] | None = None) -> Response:
    response = Response(body, status=body["status"], content_type=PROBLEM_CONTENT_TYPE)
    for name, value in (headers or {}).items():
        response[name] = value
    return response


def _is_nul_in_input(exc: Exception) -> bool:
    # psycopg refuses a NUL character in a text parameter before sending the query; the value
    # can only have come from the request, so this is the client's error, not ours.
    return isinstance(exc, DataError) and "NUL (0x00)" in str(exc)


def _roll_back_request(context: dict[str, Any]) -> None:
    """Mark the request's transaction for rollback, as DRF's ``set_rollback`` does, except
    for a view exempt from ``ATOMIC_REQUESTS``: it has no request transaction, and the
    enclosing atomic block (a caller's, or a test's) is not its to doom."""
    match = getattr(context.get("request"), "resolver_match", None)
    exempt: set[str] = getattr(getattr(match, "func", None), "_non_atomic_requests", set())
    for connection in connections.all():
        if (
            connection.settings_dict.get("ATOMIC_REQUESTS")
            and connection.in_atomic_block
            and connection.alias not in exempt
        ):
            connection.set_rollback(True)


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response:
    """DRF's EXCEPTION_HANDLER: translate everything, including unexpected errors.

    It never returns ``None``, so DRF never falls back to Django's (HTML) error pages, and it
    marks the request's transaction for rollback: a rejected request stores nothing.
    """
    _roll_back_request(context)
    if database_unavailable(exc):
        body = database_unavailable_body(exc)
        return _response(body, {"Retry-After": str(DATABASE_RETRY_AFTER)})
    headers: dict[str, str] = {}
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    elif isinstance(exc, DjangoValidationError):
        errors = (
            {k: [str(m) for m in v] for k, v in exc.message_dict.items()}
            if hasattr(exc, "error_dict")
            else {"body": [str(m) for m in exc.messages]}
        )
        return _response(problem_body(400, INVALID_FIELDS, errors=errors), headers)
    elif _is_nul_in_input(exc):
        return _response(
            problem_body(400, "The request contains a NUL (0x00) character, which is not allowed.")
        )
    elif isinstance(exc, RequestDataTooBig):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return _response(problem_body(413, f"The request body exceeds {limit} bytes."))
    elif isinstance(exc, SuspiciousOperation | UnreadablePostError):
        # What Django's own handler answers with 400 outside DRF (bad Host, too many fields,
        # a body the client stopped sending).
        return _response(problem_body(400, "The request could not be processed."))

    if isinstance(exc, DomainError):
        body = problem_body(
            exc.status, exc.detail, slug=exc.slug, errors=exc.errors, extra=exc.extra
        )
        return _response(body, headers)

    if isinstance(exc, exceptions.APIException):
        auth_header = getattr(exc, "auth_header", None)
        if auth_header:
            headers["WWW-Authenticate"] = str(auth_header)
        wait = getattr(exc, "wait", None)
        if wait:
            headers["Retry-After"] = str(int(wait))
        if isinstance(exc, exceptions.ValidationError):
            body = problem_body(400, INVALID_FIELDS, errors=flatten_errors(exc.detail))
        elif isinstance(exc, exceptions.ParseError):
            body = problem_body(400, f"Malformed request body: {exc.detail}", slug="malformed-body")
        elif (
            isinstance(exc, exceptions.NotFound)
            and str(exc.detail) == CursorPagination.invalid_cursor_message
        ):
            # DRF answers a bad ?cursor= with 404; it is a bad query parameter.
            body = problem_body(
                400,
                "Invalid query parameter: cursor.",
                errors={"cursor": ["Not a cursor this API issued; follow next/previous links."]},
            )
        else:
            detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
            body = problem_body(exc.status_code, detail)
        return _response(body, headers)

    logger.exception("unhandled API error", exc_info=exc)
    return _response(problem_body(500, SERVER_ERROR))


# --- Django's error handlers, for requests that never reach a DRF view -------------------------


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


def json_problem(status_code: int, detail: str) -> JsonResponse:
    return JsonResponse(
        problem_body(status_code, detail), status=status_code, content_type=PROBLEM_CONTENT_TYPE
    )


def handler404(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if _is_api(request):
        return json_problem(status.HTTP_404_NOT_FOUND, "No such resource.")
    return page_not_found(request, exception or Http404())


def handler500(request: HttpRequest) -> HttpResponse:
    if _is_api(request):
        return json_problem(500, SERVER_ERROR)
    return server_error(request)


def handler400(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if _is_api(request):
        return json_problem(400, "Bad request.")
    return bad_request(request, exception or Exception())


def handler403(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if _is_api(request):
        return json_problem(403, "Forbidden.")
    return permission_denied(request, exception or PermissionDenied())
