"""gunicorn settings shared by ``memoryconsole up``, the image and compose.

The access log keeps the method, the path without its query string, the status, the size and
the duration. Query strings carry subject ids and search terms (``?subject=user:8812``), which
are personal data with no place in a log kept for operations.
"""

from __future__ import annotations

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
