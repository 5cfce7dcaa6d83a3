"""Every API error is ``application/problem+json`` (RFC 9457).

``type``, ``title``, ``status``, ``detail``; validation failures add ``errors``:
``{field_path: [message, ...]}``. Domain errors raise :class:`Problem` (or a subclass);
DRF and Django errors are translated here, in one place.
"""

from __future__ import annotations

import logging
from typing import Any

from django.core.exceptions import PermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import set_rollback

logger = logging.getLogger(__name__)

PROBLEM_CONTENT_TYPE = "application/problem+json"
TYPE_BASE = "https://memoryconsole.dev/problems/"

TITLES = {
    400: "Bad request",
    401: "Not authenticated",
    403: "Forbidden",
    404: "Not found",
    405: "Method not allowed",
    406: "Not acceptable",
    409: "Conflict",
    413: "Payload too large",
    415: "Unsupported media type",
    422: "Unprocessable content",
    429: "Too many requests",
    500: "Internal server error",
    503: "Service unavailable",
}

SLUGS = {
    400: "validation-error",
    401: "not-authenticated",
    403: "forbidden",
    404: "not-found",
    405: "method-not-allowed",
    406: "not-acceptable",
    409: "conflict",
    413: "payload-too-large",
    415: "unsupported-media-type",
    422: "unprocessable",
    429: "throttled",
    500: "server-error",
    503: "unavailable",
}


class Problem(exceptions.APIException):
    """A domain error with its HTTP status and optional extra members."""

    status_code = 400
    default_detail = "The request could not be processed."
    slug: str | None = None

    def __init__(
        self,
        detail: str | None = None,
        *,
        status_code: int | None = None,
        slug: str | None = None,
        errors: dict[str, list[str]] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(detail or self.default_detail)
        if status_code is not None:
            self.status_code = status_code
        if slug is not None:
            self.slug = slug
        self.errors = errors
        self.extra = extra or {}


def problem_body(
    status_code: int,
    detail: str,
    *,
    slug: str | None = None,
    errors: dict[str, list[str]] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "type": TYPE_BASE + (slug or SLUGS.get(status_code, "error")),
        "title": TITLES.get(status_code, "Error"),
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
            path = f"{prefix}.{key}" if prefix else str(key)
            if key == "non_field_errors" and prefix == "":
                path = "body"
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


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response:
    """DRF's EXCEPTION_HANDLER: translate everything, including unexpected errors."""
    set_rollback()
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
        return _response(
            problem_body(400, "The request has invalid fields.", errors=errors), headers
        )

    if isinstance(exc, Problem):
        body = problem_body(
            exc.status_code, str(exc.detail), slug=exc.slug, errors=exc.errors, extra=exc.extra
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
            body = problem_body(
                400, "The request has invalid fields.", errors=flatten_errors(exc.detail)
            )
        elif isinstance(exc, exceptions.ParseError):
            body = problem_body(400, f"Malformed request body: {exc.detail}", slug="malformed-body")
        else:
            detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
            body = problem_body(exc.status_code, detail)
        return _response(body, headers)

    logger.exception("unhandled API error", exc_info=exc)
    return _response(problem_body(500, "An unexpected error occurred; it has been logged."))


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


def json_problem(status_code: int, detail: str) -> JsonResponse:
    return JsonResponse(
        problem_body(status_code, detail), status=status_code, content_type=PROBLEM_CONTENT_TYPE
    )


def handler404(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if _is_api(request):
        return json_problem(status.HTTP_404_NOT_FOUND, "No such resource.")
    from django.views.defaults import page_not_found

    return page_not_found(request, exception or Http404())


def handler500(request: HttpRequest) -> HttpResponse:
    if _is_api(request):
        return json_problem(500, "An unexpected error occurred; it has been logged.")
    from django.views.defaults import server_error

    return server_error(request)


def handler400(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if _is_api(request):
        return json_problem(400, "Bad request.")
    from django.views.defaults import bad_request

    return bad_request(request, exception or Exception())


def handler403(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if _is_api(request):
        return json_problem(403, "Forbidden.")
    from django.views.defaults import permission_denied

    return permission_denied(request, exception or PermissionDenied())
