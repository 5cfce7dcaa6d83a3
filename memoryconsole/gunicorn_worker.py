"""gunicorn's sync worker, answering the requests gunicorn refuses itself with problem documents.

gunicorn parses the request line and headers before the application sees anything, and
answers what it cannot parse or what passes its limits (a URL longer than
``limit_request_line``: 414; more than ``limit_request_fields`` headers or one longer than
``limit_request_field_size``: 431; a malformed request line or header: 400) with an HTML page
of its own. Every API error is ``application/problem+json``; so is each of these, with the
status gunicorn chose. The log line names the refusal's kind only: gunicorn's own message
can quote the request line, whose query string may hold personal data.

Only the refusals change; anything else (an application error, a response header the
application got wrong) is gunicorn's own handling.
"""

from __future__ import annotations

import json
from http import HTTPStatus
from typing import Any

from gunicorn.http import errors
from gunicorn.workers.sync import SyncWorker

# gunicorn's status for each refusal (gunicorn.workers.base.Worker.handle_error); any other
# parse error of the request is a 400.
REFUSALS: tuple[tuple[type[Exception], int, str], ...] = (
    (errors.LimitRequestLine, 414, "The URL is longer than this server accepts."),
    (
        errors.LimitRequestHeaders,
        431,
        "The request has more header fields, or a longer one, than this server accepts.",
    ),
    (errors.ExpectationFailed, 417, "The Expect header names an expectation not supported."),
    (errors.UnsupportedTransferCoding, 501, "The Transfer-Encoding is not supported."),
    (errors.ForbiddenProxyRequest, 403, "Proxy requests are not accepted from this address."),
)
# Not the client's doing: gunicorn answers these itself (500).
NOT_REFUSALS: tuple[type[Exception], ...] = (
    errors.ConfigurationProblem,
    errors.InvalidResponseHeader,
    errors.InvalidResponseHeaderName,
)
MALFORMED = "The request line or a header could not be parsed as HTTP/1.1."


def refusal(exc: BaseException) -> tuple[int, str] | None:
    """The status and detail to refuse the request with, or None when ``exc`` is not a
    refusal of the client's request."""
    if not isinstance(exc, errors.ParseException) or isinstance(exc, NOT_REFUSALS):
        return None
    for kind, status, detail in REFUSALS:
        if isinstance(exc, kind):
            return status, detail
    return 400, MALFORMED


def problem_response(status: int, detail: str) -> bytes:
    """The whole HTTP response: a problem document, and the connection closed after it (what
    follows a request gunicorn could not parse cannot be trusted to be the next one)."""
    from apps.core.problems import PROBLEM_CONTENT_TYPE, problem_body

    body = json.dumps(problem_body(status, detail)).encode()
    head = (
        f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\n"
        "Connection: close\r\n"
        f"Content-Type: {PROBLEM_CONTENT_TYPE}\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Cache-Control: no-store\r\n"
        "\r\n"
    )
    return head.encode("latin-1") + body


class ProblemSyncWorker(SyncWorker):  # type: ignore[misc]  # gunicorn ships no types
    """``worker_class`` of ``memoryconsole.gunicorn_conf``."""

    def handle_error(self, req: Any, client: Any, addr: Any, exc: BaseException) -> None:
        answer = refusal(exc)
        if answer is None:
            super().handle_error(req, client, addr, exc)
            return
        status, detail = answer
        address = (addr or ("",))[0]
        self.log.warning(
            "refused a request from ip=%s: %s (%s)", address, type(exc).__name__, status
        )
        try:
            client.sendall(problem_response(status, detail))
        except OSError:
            self.log.debug("could not send the refusal")
