"""The API's request bodies and responses as JSON, and the requests Django cannot construct.

The JSON body parser (whose every failure is a problem), the JSON renderer, content
negotiation and a WSGI guard; the problem documents themselves are :mod:`apps.core.problems`'.

This module is imported while DRF builds ``APIView`` (``DEFAULT_PARSER_CLASSES``), so it must
not import DRF's views, generics or drf-spectacular's schema machinery.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterable, Mapping
from typing import IO, TYPE_CHECKING, Any

from django.utils.http import parse_header_parameters
from rest_framework import exceptions, parsers, renderers
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.request import Request
from rest_framework.utils import json as drf_json

from apps.core.problems import PROBLEM_CONTENT_TYPE, problem_body
from apps.core.validation import TOO_DEEP, json_body_problems, json_loads

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment


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


class JSONBodyParser(parsers.JSONParser):
    """DRF's JSON parser, where every unparseable body is a ``400``, never a ``500``.

    DRF turns ``ValueError`` into a parse error; this also catches the rest (a body nested
    deeper than the interpreter's recursion limit raises ``RecursionError``) and refuses
    bodies nested beyond :data:`~apps.core.validation.MAX_JSON_DEPTH`. An object that names a
    member twice is a ``400`` naming it by its path (``scope.domain``), at any depth: JSON
    parsers disagree on which of the two values counts, so neither may. (DRF reads the body
    through ``request.body``, so Django's ``DATA_UPLOAD_MAX_MEMORY_SIZE`` applies: ``413``.)
    A Content-Type naming a charset other than UTF-8 is a ``415`` (:func:`body_charset`).
    """

    def parse(
        self,
        stream: IO[Any],
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        charset = body_charset(media_type)
        if charset is not None:
            raise exceptions.UnsupportedMediaType(
                media_type or "",
                detail=f"Unsupported charset {charset[:40]!r}: the API reads JSON as UTF-8 "
                f"only; send the body as UTF-8, with charset=utf-8 or no charset.",
            )
        try:
            data = json_loads(
                stream.read().decode("utf-8"),
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


def body_charset(media_type: str | None) -> str | None:
    """The ``charset`` a request's Content-Type names if it is not UTF-8 (None when it is, or
    names none). JSON is UTF-8 (RFC 8259); a body in another charset is refused rather than
    read as UTF-8, or decoded by whatever codec the client names."""
    _, params = parse_header_parameters(media_type or "")
    charset = params.get("charset")
    if charset is None:
        return None
    try:
        if codecs.lookup(charset).name == "utf-8":
            return None
    except LookupError:
        pass
    return charset


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


# --- content negotiation: ``application/problem+json`` is JSON the API answers in -----------
#
# A client that names only ``application/problem+json`` in ``Accept`` (as clients that read
# errors by their media type do) accepts the API's JSON: its answers are JSON, and its errors
# are problem documents. An ``Accept`` that admits neither is still a ``406``.

JSON = "application/json"


def as_json(token: str) -> str:
    """An ``Accept`` token naming problem+json, as the same token naming JSON (its
    parameters, ``q`` among them, kept); any other token unchanged."""
    media_type, separator, parameters = token.partition(";")
    if media_type.strip().lower() == PROBLEM_CONTENT_TYPE:
        return JSON + separator + parameters
    return token


class ProblemJsonNegotiation(DefaultContentNegotiation):
    """DRF's negotiation, where ``application/problem+json`` stands for ``application/json``."""

    def get_accept_list(self, request: Request) -> list[str]:
        return [as_json(token) for token in super().get_accept_list(request)]


NDJSON = "application/x-ndjson"


class NDJSONRenderer(renderers.BaseRenderer):
    """Lets a client ask for ``application/x-ndjson`` (an export's stream), which the view
    writes itself; anything DRF renders through it (an error) is one JSON line."""

    media_type = NDJSON
    format = "ndjson"
    charset = "utf-8"

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Mapping[str, Any] | None = None,
    ) -> bytes:
        if data is None:
            return b""
        return JSONRenderer().render(data, accepted_media_type, renderer_context) + b"\n"
