"""HTTP hygiene of the agent API."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.utils.cache import add_never_cache_headers

API_PREFIX = "/api/"


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
