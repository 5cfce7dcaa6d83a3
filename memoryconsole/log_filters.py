"""Filters of the logging configuration (``LOGGING`` in settings)."""

from __future__ import annotations

import logging


class RefusalWithoutTraceback(logging.Filter):
    """A refused request (a 4xx that ``django.request`` logs: a 403 for a role that lacks a
    permission, a 400 for a suspicious header) is one line. Django attaches the exception
    that refused it, whose traceback says nothing an operator needs and buries the log; a
    server error (5xx) keeps its traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        status = getattr(record, "status_code", None)
        if isinstance(status, int) and 400 <= status < 500:
            record.exc_info = None
            record.exc_text = None
        return True
