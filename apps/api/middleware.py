"""HTTP hygiene of the agent API."""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string
from django.utils.cache import add_never_cache_headers

from apps.core.problems import (
    DATABASE_RETRY_AFTER,
    DATABASE_UNAVAILABLE,
    PROBLEM_CONTENT_TYPE,
    database_unavailable,
    problem_body,
)

logger = logging.getLogger(__name__)

API_PREFIX = "/api/"


def database_unavailable_response(request: HttpRequest) -> HttpResponse:
    """503 with ``Retry-After``: problem+json for the API, the console's page otherwise."""
    response: HttpResponse
    if request.path.startswith(API_PREFIX):
        response = JsonResponse(
            problem_body(503, DATABASE_UNAVAILABLE, slug="database-unavailable"),
            status=503,
            content_type=PROBLEM_CONTENT_TYPE,
        )
    else:
        # No request context: its processors would read the database.
        response = HttpResponse(render_to_string("503.html"), status=503)
    response["Retry-After"] = str(DATABASE_RETRY_AFTER)
    return response


class DatabaseUnavailableMiddleware:
    """Answer 503 instead of a 500 while the database is away.

    The request's transaction (ATOMIC_REQUESTS) is opened around the view, so a server that is
    down fails there, before DRF's exception handler could see it; this catches it for the
    API and the console alike.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not database_unavailable(exception):
            return None
        logger.warning("database unavailable: %s", type(exception).__name__)
        return database_unavailable_response(request)


class ApiNoStoreMiddleware:
    """Every API response is ``Cache-Control: no-store``: answers carry memory content and
    receipts, which no browser, proxy or CDN between an agent and the server may keep."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if request.path.startswith(API_PREFIX):
            add_never_cache_headers(response)
        return response
