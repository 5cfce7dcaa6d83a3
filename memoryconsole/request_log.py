"""The log's lines: the formatters of the logging configuration (``LOGGING`` in settings),
and one line and the request metrics for every request the application answers.

A line is one JSON object, or plain text (``MEMORYCONSOLE_LOG_FORMAT``). A record may carry
structured fields (``extra={"fields": {...}}``: the request's line does); JSON writes them as
members of the line, plain text appends them as ``key=value``. Neither formatter adds anything
the record does not hold, so what stays out of a log message (bodies, query strings) stays
out of both. ``LOGGING`` loads the formatters before the app registry is ready, so this
module imports no app's models at its top.

The request's line (logger ``memoryconsole.request``) holds the request id, the tenant's id,
the agent credential's name, the route's pattern, the method, the status and the duration.
Never the raw path (its ids), the query string (subject ids and search terms travel there), a
header or a body: what agents wrote stays out of the log, as it stays out of the metrics'
labels.

The request id is the client's ``X-Request-ID`` when it is a plain token (letters, digits and
``._:+/=-``, at most 128), else a new one; either way the response carries it back, so a
client's report and this line can be matched.

First in ``MIDDLEWARE``: the duration covers every other middleware, and the static files
whitenoise answers before any view are counted too. It ends when the application returns its
response: a streamed body's transfer is not part of it.
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponseBase
from prometheus_client import Counter, Histogram


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    fields = getattr(record, "fields", None)
    return fields if isinstance(fields, dict) else {}


class JsonFormatter(logging.Formatter):
    """``{"time", "level", "logger", "message", ...fields, "exception"?}`` on one line."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            **_fields(record),
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exception"] = record.exc_text
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        # ASCII only: a line is one line whatever a message holds (newlines, separators).
        return json.dumps(line, default=str)


class PlainFormatter(logging.Formatter):
    """The standard line, then the record's fields as ``key=value`` (``-`` for none)."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        text = super().formatMessage(record)
        fields = _fields(record)
        if not fields:
            return text
        pairs = " ".join(
            f"{key}={'-' if value is None else value}" for key, value in fields.items()
        )
        return f"{text} {pairs}"


logger = logging.getLogger("memoryconsole.request")

REQUEST_ID_HEADER = "X-Request-ID"
_PLAIN_TOKEN = re.compile(r"[A-Za-z0-9._:+/=-]{1,128}")
# Route labels of responses no URL pattern answered.
STATIC_ROUTE = "(static)"
UNROUTED = "(unrouted)"
HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})

# Served at /metrics with the apps' families (apps.core.metrics, whose labels follow the same
# rule: fixed vocabularies only, so a client cannot add series).
http_requests = Counter(
    "memoryconsole_http_requests",
    "Requests answered, by route pattern, method and status.",
    ["route", "method", "status"],
)
# No status label: it would multiply every bucket by every status; the counter above has it.
http_request_duration = Histogram(
    "memoryconsole_http_request_duration_seconds",
    "Time from the request reaching the application to its response, by route and method.",
    ["route", "method"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
)


def request_id_for(value: str | None) -> str:
    """The client's request id when it is a plain token, else a new one."""
    if value and _PLAIN_TOKEN.fullmatch(value):
        return value
    return uuid.uuid4().hex


def route_of(request: HttpRequest, response: HttpResponseBase) -> str:
    """The URL pattern that answered (``api/v1/records/<str:record_id>/history``), never the
    path itself; static files and requests no pattern matched get one label each."""
    match = getattr(request, "resolver_match", None)
    if match is not None and match.route:
        return str(match.route)
    if response.status_code < 400 and request.path.startswith(settings.STATIC_URL):
        return STATIC_ROUTE
    return UNROUTED


def http_method_label(method: str | None) -> str:
    """The method as a label: any other verb is ``other``, so clients cannot add series."""
    method = (method or "").upper()
    return method if method in HTTP_METHODS else "other"


def caller_of(request: HttpRequest) -> tuple[str | None, str | None]:
    """The tenant's id and the credential's name the request acted as, where known: an agent
    authenticated by its credential (the API), a person on a tenant's console pages."""
    # Not at the top: LOGGING imports this module (its formatters) before the models load.
    from apps.tenancy.models import AgentCredential, Tenant

    # DRF copies its authentication result onto the request it wraps.
    credential = getattr(request, "auth", None)
    if isinstance(credential, AgentCredential):
        return str(credential.tenant_id), credential.name
    tenant = getattr(request, "console_tenant", None)
    if isinstance(tenant, Tenant):
        return str(tenant.pk), None
    return None, None


class RequestLogMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        started = time.perf_counter()
        request_id = request_id_for(request.headers.get(REQUEST_ID_HEADER))
        response = self.get_response(request)
        duration = time.perf_counter() - started
        response[REQUEST_ID_HEADER] = request_id
        route = route_of(request, response)
        method = http_method_label(request.method)
        status = response.status_code
        http_requests.labels(route, method, str(status)).inc()
        http_request_duration.labels(route, method).observe(duration)
        tenant, credential = caller_of(request)
        fields: dict[str, Any] = {
            "request_id": request_id,
            "method": method,
            "route": route,
            "status": status,
            "duration_ms": round(duration * 1000, 1),
            "tenant": tenant,
            "credential": credential,
        }
        logger.info("%s %s %s", method, route, status, extra={"fields": fields})
        return response
