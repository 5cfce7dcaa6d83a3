"""HTTP hygiene of the agent API."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string
from django.utils.cache import add_never_cache_headers
from django.utils.deprecation import MiddlewareMixin
from psycopg import ClientCursor
from psycopg.pq import TransactionStatus

from apps.core.problems import (
    DATABASE_RETRY_AFTER,
    PROBLEM_CONTENT_TYPE,
    database_timed_out,
    database_unavailable,
    database_unavailable_body,
    problem_body,
)

logger = logging.getLogger(__name__)

API_PREFIX = "/api/"


def database_unavailable_response(request: HttpRequest, error: BaseException) -> HttpResponse:
    """503 with ``Retry-After``: problem+json for the API, the console's page otherwise."""
    response: HttpResponse
    body = database_unavailable_body(error)
    if request.path.startswith(API_PREFIX):
        response = JsonResponse(body, status=503, content_type=PROBLEM_CONTENT_TYPE)
    else:
        # No request context: its processors would read the database.
        page = render_to_string("503.html", {"timed_out": database_timed_out(error)})
        response = HttpResponse(page, status=503)
    response["Retry-After"] = str(DATABASE_RETRY_AFTER)
    return response


class DatabaseUnavailableMiddleware(MiddlewareMixin):
    """Answer 503 instead of a 500 while the database is away.

    The request's transaction (ATOMIC_REQUESTS) is opened around the view, so a server that is
    down fails there, before DRF's exception handler could see it; this catches it for the
    API and the console alike.
    """

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not database_unavailable(exception):
            return None
        return database_unavailable_response(request, exception)


def _statement_timeout_set(
    execute: Callable[..., Any], sql: str, params: Any, many: bool, context: dict[str, Any]
) -> Any:
    """Before the first statement of each transaction of the request: ``SET LOCAL
    statement_timeout``. Transaction-local, so it ends with the request's transaction and never
    reaches the next user of the connection (a pooler's included); a statement outside any
    transaction (autocommit: the health check) runs unbounded."""
    database = context["connection"]
    raw = database.connection
    if not (
        database.in_atomic_block
        and raw is not None
        and raw.info.transaction_status == TransactionStatus.IDLE
    ):
        return execute(sql, params, many, context)
    timeout = f"{int(settings.REQUEST_STATEMENT_TIMEOUT * 1000)}ms"
    cursor = context["cursor"]
    if many or not isinstance(sql, str) or not isinstance(cursor.cursor, ClientCursor):
        # On the psycopg connection itself: it opens the transaction the statement then runs
        # in, without passing through this wrapper again.
        raw.execute("SELECT set_config('statement_timeout', %s, true)", [timeout])
        return execute(sql, params, many, context)
    # Where parameters are bound on the client (Django's default), the setting goes in the
    # statement's own query string, ahead of it: the server runs them in order, in one round
    # trip, and the cursor moves on to the statement's results as its caller expects. The
    # setting is a number of milliseconds: nothing in it for the client's binding to read.
    result = execute(
        f"SELECT set_config('statement_timeout', '{timeout}', true); {sql}", params, many, context
    )
    cursor.nextset()
    return result


class RequestStatementTimeoutMiddleware:
    """Every statement of a web request runs under ``REQUEST_STATEMENT_TIMEOUT``
    (``MEMORYCONSOLE_REQUEST_STATEMENT_TIMEOUT``), lock waits included.

    A request blocked behind a lock (an index built, a table rewritten) is cancelled by the
    database before gunicorn's worker timeout kills its worker (an empty 500): it answers
    ``503`` with ``Retry-After`` (problem+json for the API, a page for the console) and its
    transaction rolls back. The worker and commands are not bounded: their long statements
    are their work.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        with connection.execute_wrapper(_statement_timeout_set):
            return self.get_response(request)


class ApiNoStoreMiddleware(MiddlewareMixin):
    """Every API response is ``Cache-Control: no-store``: answers carry memory content and
    receipts, which no browser, proxy or CDN between an agent and the server may keep."""

    def process_response(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        if request.path.startswith(API_PREFIX):
            add_never_cache_headers(response)
        return response


# --- the longest URL the product accepts, whatever server runs it --------------------------
#
# A URL (path and query string, as sent) longer than :data:`MAX_URL_BYTES` is a ``414``: a
# problem document under ``/api/``, plain text elsewhere. Long inputs belong in a POST body
# (search, erasures), whose limit is ``DATA_UPLOAD_MAX_MEMORY_SIZE``. gunicorn's own bound on
# the request line (``memoryconsole.gunicorn_conf``, answered with a problem document by
# ``memoryconsole.gunicorn_worker``) lies just above, so this one answers first under gunicorn.

MAX_URL_BYTES = 8000


def url_bytes(request: HttpRequest) -> int:
    """The length of the request's URL as the client sent it (gunicorn's ``RAW_URI``), or as
    it would be sent (the path percent-encoded, then the query string)."""
    raw = request.META.get("RAW_URI")
    if isinstance(raw, str):
        return len(raw.encode("latin-1", errors="replace"))
    # WSGI hands the path over decoded, one character per byte (latin-1).
    path = quote(str(request.META.get("PATH_INFO", "")).encode("latin-1", errors="replace"))
    query = request.META.get("QUERY_STRING", "")
    return len(path) + (len(query) + 1 if query else 0)


class UrlLengthMiddleware:
    """Early in ``MIDDLEWARE``: a URL past :data:`MAX_URL_BYTES` reaches no view."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        length = url_bytes(request)
        if length <= MAX_URL_BYTES:
            return self.get_response(request)
        detail = (
            f"The URL is {length} bytes long; at most {MAX_URL_BYTES} are accepted. Send long "
            "inputs in a request body."
        )
        if request.path_info.startswith("/api/"):
            response: HttpResponse = JsonResponse(
                problem_body(414, detail), status=414, content_type=PROBLEM_CONTENT_TYPE
            )
        else:
            response = HttpResponse(detail, status=414, content_type="text/plain; charset=utf-8")
        response["Cache-Control"] = "no-store"
        return response
