"""gunicorn settings shared by ``memoryconsole up``, the image and compose.

gunicorn keeps no access log: the application writes one line per request itself
(``memoryconsole.request_log``: the route's pattern, never the path's ids or the query
string, whose subject ids and search terms are personal data with no place in a log kept for
operations), with the tenant and the credential gunicorn cannot know.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from typing import Any

from memoryconsole.database import REQUEST_TIMEOUT_MARGIN, request_statement_timeout
from memoryconsole.instance import METRICS_DIRECTORY_ENV

accesslog = None

# Requests gunicorn refuses itself (a URL or headers past the limits below, a malformed
# request line) are answered with problem documents, as every API error is.
worker_class = "memoryconsole.gunicorn_worker.ProblemSyncWorker"
# gunicorn's bounds on what it parses before the application: the request line at its maximum
# (8190 bytes, so the application's own URL limit, apps.api.middleware, answers first), and
# its default header limits (documented in docs/api.md).
limit_request_line = 8190
limit_request_fields = 100
limit_request_field_size = 8190

# A worker silent this long is killed, and its client gets an empty answer. The database
# cancels a request's statement before that (MEMORYCONSOLE_REQUEST_STATEMENT_TIMEOUT), so a
# request blocked on a lock answers 503 with Retry-After and rolls back; at the defaults this
# is gunicorn's own 30 s.
timeout = max(30, math.ceil(request_statement_timeout()) + REQUEST_TIMEOUT_MARGIN)


# The workers count requests into files of one directory, so that /metrics, answered by any
# one of them, sums them all. ``up`` gives the directory it shares with its Celery worker;
# run on its own (the image, compose), gunicorn makes one for its own run, before any worker
# starts (the application is not preloaded, so none has counted yet).
_own_metrics_directory: str | None = None


def on_starting(server: Any) -> None:
    global _own_metrics_directory
    if not os.environ.get(METRICS_DIRECTORY_ENV):
        _own_metrics_directory = tempfile.mkdtemp(prefix="memoryconsole-metrics-")
        os.environ[METRICS_DIRECTORY_ENV] = _own_metrics_directory


def on_exit(server: Any) -> None:
    if _own_metrics_directory is not None:
        shutil.rmtree(_own_metrics_directory, ignore_errors=True)
