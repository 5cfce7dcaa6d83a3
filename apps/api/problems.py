"""Every API error is ``application/problem+json`` (RFC 9457).

``type``, ``title``, ``status``, ``detail``; validation failures add ``errors``:
``{field_path: [message, ...]}``. Domain errors raise :class:`Problem` (or a subclass);
DRF and Django errors are translated here, in one place: the DRF exception handler, the
Django error handlers for ``/api/`` paths, the JSON body parser (whose every failure is a
problem) and a WSGI guard for the requests Django cannot even construct.
:mod:`apps.api.schema` documents these responses in OpenAPI.

This module is imported while DRF builds ``APIView`` (``DEFAULT_PARSER_CLASSES``), so it must
not import DRF's views, generics or drf-spectacular's schema machinery.
"""

from __future__ import annotations

import codecs
import json
import logging
import math
from collections.abc import Iterable, Mapping
from http import HTTPStatus
from typing import IO, TYPE_CHECKING, Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig, SuspiciousOperation
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import DataError, connections
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse, UnreadablePostError
from django.utils.http import parse_header_parameters
from rest_framework import exceptions, parsers, renderers, status
from rest_framework.pagination import CursorPagination
from rest_framework.response import Response
from rest_framework.utils import json as drf_json

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

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
    414: "URI too long",
    415: "Unsupported media type",
    422: "Unprocessable content",
    429: "Too many requests",
    431: "Request header fields too large",
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
    414: "uri-too-long",
    415: "unsupported-media-type",
    422: "unprocessable",
    429: "throttled",
    431: "header-fields-too-large",
    500: "server-error",
    503: "unavailable",
}

INVALID_FIELDS = "The request has invalid fields."
SERVER_ERROR = "An unexpected error occurred; it has been logged."

# Deeper JSON than this is refused at the door: every later step (validation, hashing,
# storage, rendering) recurses through it, and Python's stack is finite.
MAX_JSON_DEPTH = 100
TOO_DEEP = f"JSON nested deeper than {MAX_JSON_DEPTH} levels."


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


def _title(status_code: int) -> str:
    if status_code in TITLES:
        return TITLES[status_code]
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
        "type": TYPE_BASE + (slug or SLUGS.get(status_code, "error")),
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
    from .middleware import DATABASE_RETRY_AFTER, DATABASE_UNAVAILABLE, database_unavailable

    _roll_back_request(context)
    if database_unavailable(exc):
        logger.warning("database unavailable: %s", type(exc).__name__)
        body = problem_body(503, DATABASE_UNAVAILABLE, slug="database-unavailable")
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


# --- request bodies ---------------------------------------------------------------------------


class JSONRenderer(renderers.JSONRenderer):
    """DRF's JSON renderer, except that data holding an unpaired UTF-16 surrogate (JSON may
    spell one, ``"\\ud800"``, and an error about an unknown field echoes its name) is written
    with JSON escapes instead of failing the response with a 500: the escape is exactly what
    the client sent."""

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Mapping[str, Any] | None = None,
    ) -> bytes:
        try:
            rendered: bytes = super().render(data, accepted_media_type, renderer_context)
        except UnicodeEncodeError:
            rendered = _ESCAPING_RENDERER.render(data, accepted_media_type, renderer_context)
        return rendered


class _EscapingJSONRenderer(renderers.JSONRenderer):
    ensure_ascii = True


_ESCAPING_RENDERER = _EscapingJSONRenderer()


UNSTORABLE_NUL = "Must not contain the NUL character (U+0000)."
UNSTORABLE_SURROGATE = "Must be valid Unicode (no unpaired surrogate code points)."
UNSTORABLE_NUMBER = "Must be a finite number (this one overflows a double)."


def unstorable_text(text: str) -> str | None:
    """Why no text column can hold ``text`` (NUL, an unpaired surrogate), or None."""
    return _unstorable_text(text)


def _unstorable_text(text: str) -> str | None:
    if "\x00" in text:
        return UNSTORABLE_NUL
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return UNSTORABLE_SURROGATE
    return None


def _child_path(parent: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{parent}[{key}]"
    return f"{parent}.{key}" if parent else key


def json_body_problems(value: Any, limit: int = MAX_JSON_DEPTH) -> dict[str, list[str]] | None:
    """What no field of any request may hold, by field path; ``None`` when there is nothing.

    A body nested deeper than ``limit`` is one problem (``body``). Otherwise every string (key
    or value) holding NUL or an unpaired surrogate, and every number that overflowed to
    infinity, is named by its path: PostgreSQL can store none of them in text or jsonb, so
    each would otherwise fail at the database, whatever the endpoint. Iterative: no recursion
    of our own through a body the client shaped.
    """
    problems: dict[str, list[str]] = {}
    stack: list[tuple[Any, str, int]] = [(value, "", 1)]
    while stack:
        item, path, depth = stack.pop()
        if isinstance(item, str):
            message = _unstorable_text(item)
        elif isinstance(item, float) and not math.isfinite(item):
            message = UNSTORABLE_NUMBER
        else:
            message = None
        if message:
            problems.setdefault(path or "body", []).append(message)
            continue
        if isinstance(item, dict):
            children: list[tuple[str | int, Any]] = list(item.items())
        elif isinstance(item, list):
            children = list(enumerate(item))
        else:
            continue
        if depth > limit:
            return {"body": [TOO_DEEP]}
        for key, child in children:
            child_path = _child_path(path, key)
            key_problem = _unstorable_text(key) if isinstance(key, str) else None
            if key_problem:
                problems.setdefault(child_path, []).append(key_problem)
                continue
            stack.append((child, child_path, depth + 1))
    return problems or None


class JSONBodyParser(parsers.JSONParser):
    """DRF's JSON parser, where every unparseable body is a ``400``, never a ``500``.

    DRF turns ``ValueError`` into a parse error; this also catches the rest (a body nested
    deeper than the interpreter's recursion limit raises ``RecursionError``) and refuses
    bodies nested beyond :data:`MAX_JSON_DEPTH`. (DRF reads the body through
    ``request.body``, so Django's ``DATA_UPLOAD_MAX_MEMORY_SIZE`` applies: ``413``.)
    """

    def parse(
        self,
        stream: IO[Any],
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        encoding = (parser_context or {}).get("encoding") or settings.DEFAULT_CHARSET
        try:
            "".encode(encoding)  # only text codecs: a bytes codec could decompress without bound
        except (LookupError, UnicodeError) as exc:
            raise exceptions.ParseError(f"Unsupported charset {encoding!r}.") from exc
        try:
            data = drf_json.loads(
                stream.read().decode(encoding),
                parse_constant=drf_json.strict_constant if self.strict else None,
            )
        except RecursionError as exc:
            raise exceptions.ParseError(TOO_DEEP) from exc
        except Exception as exc:
            raise exceptions.ParseError(f"JSON parse error - {exc}") from exc
        problems = json_body_problems(data)
        if problems == {"body": [TOO_DEEP]}:
            raise exceptions.ParseError(TOO_DEEP)
        if problems:
            raise exceptions.ValidationError(problems)
        return data


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
    from django.views.defaults import page_not_found

    return page_not_found(request, exception or Http404())


def handler500(request: HttpRequest) -> HttpResponse:
    if _is_api(request):
        return json_problem(500, SERVER_ERROR)
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


# --- WSGI: requests Django cannot even construct ----------------------------------------------


def unusable_charset(environ: Mapping[str, Any]) -> str | None:
    """The ``charset`` of the request's Content-Type if Django would crash on it, else None.

    ``WSGIRequest.__init__`` decodes the query string with that charset. Unknown charsets
    are ignored, and undecodable bytes fall back to latin-1, but a known *non-text* codec
    (``rot13``, ``hex``, ``zlib``...) or one failing otherwise (``idna``) raises there,
    before any middleware or error handler: the server answers with its own 500 page.
    """
    _, params = parse_header_parameters(str(environ.get("CONTENT_TYPE", "")))
    charset = params.get("charset")
    if not charset:
        return None
    try:
        codecs.lookup(charset)
    except LookupError:
        return None  # Django ignores it
    query = str(environ.get("QUERY_STRING", "")).encode("latin-1", errors="replace")
    try:
        "".encode(charset)
        query.decode(charset)
    except UnicodeDecodeError:
        return None  # Django falls back to latin-1
    except Exception:
        return charset
    return None


def reject_unusable_charsets(application: WSGIApplication) -> WSGIApplication:
    """Wrap the WSGI application: a request whose charset Django cannot construct a request
    from gets a ``400`` (a problem document under ``/api/``) instead of a server error page."""

    def guarded(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        charset = unusable_charset(environ)
        if charset is None:
            return application(environ, start_response)
        detail = f"Unsupported charset {charset[:40]!r} in the Content-Type header."
        if str(environ.get("PATH_INFO", "")).startswith("/api/"):
            body = json.dumps(problem_body(400, detail)).encode()
            content_type = PROBLEM_CONTENT_TYPE
        else:
            body, content_type = detail.encode(), "text/plain; charset=utf-8"
        start_response(
            "400 Bad Request",
            [("Content-Type", content_type), ("Content-Length", str(len(body)))],
        )
        return [body]

    return guarded
