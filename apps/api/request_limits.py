"""The longest URL the product accepts, whatever server runs it.

A URL (path and query string, as sent) longer than :data:`MAX_URL_BYTES` is a ``414``: a
problem document under ``/api/``, plain text elsewhere. Long inputs belong in a POST body
(search, erasures), whose limit is ``DATA_UPLOAD_MAX_MEMORY_SIZE``. gunicorn's own bound on
the request line (``memoryconsole.gunicorn_conf``, answered with a problem document by
``memoryconsole.gunicorn_worker``) lies just above, so this one answers first under gunicorn.
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import quote

from django.http import HttpRequest, HttpResponse, JsonResponse

from apps.core.problems import PROBLEM_CONTENT_TYPE, problem_body

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
