"""Formatters of the logging configuration (``LOGGING`` in settings): one JSON object per line,
or plain text (``MEMORYCONSOLE_LOG_FORMAT``).

A record may carry structured fields (``extra={"fields": {...}}``: the request log does,
``memoryconsole.request_log``); JSON writes them as members of the line, plain text appends
them as ``key=value``. Neither formatter adds anything the record does not hold, so what
stays out of a log message (bodies, query strings) stays out of both.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any


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
