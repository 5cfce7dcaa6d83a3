"""gunicorn settings shared by ``memoryconsole up``, the image and compose.

The access log keeps the method, the path without its query string, the status, the size and
the duration. Query strings carry subject ids and search terms (``?subject=user:8812``), which
are personal data with no place in a log kept for operations.
"""

from __future__ import annotations

import math

from memoryconsole.database import REQUEST_TIMEOUT_MARGIN, request_statement_timeout

accesslog = "-"
access_log_format = '%(h)s "%(m)s %(U)s" %(s)s %(B)s %(M)sms'

# Requests gunicorn refuses itself (a URL or headers past the limits below, a malformed
# request line) are answered with problem documents, as every API error is.
worker_class = "memoryconsole.gunicorn_worker.ProblemSyncWorker"
# gunicorn's bounds on what it parses before the application: the request line at its maximum
# (8190 bytes, so the application's own URL limit, apps.api.request_limits, answers first), and
# its default header limits (documented in docs/api.md).
limit_request_line = 8190
limit_request_fields = 100
limit_request_field_size = 8190

# A worker silent this long is killed, and its client gets an empty answer. The database
# cancels a request's statement before that (MEMORYCONSOLE_REQUEST_STATEMENT_TIMEOUT), so a
# request blocked on a lock answers 503 with Retry-After and rolls back; at the defaults this
# is gunicorn's own 30 s.
timeout = max(30, math.ceil(request_statement_timeout()) + REQUEST_TIMEOUT_MARGIN)
