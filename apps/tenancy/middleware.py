"""Per-request hygiene for the ambient tenant."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from .context import deactivate_tenant


class TenantContextResetMiddleware:
    """Forget the Python-side tenant after each request (the database side ends with the
    request's transaction), so a thread never carries one request's tenant into the next."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        deactivate_tenant()
        try:
            return self.get_response(request)
        finally:
            deactivate_tenant()
