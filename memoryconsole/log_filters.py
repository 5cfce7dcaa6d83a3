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


# The beat's outbox relay (apps.work.tasks; tests/api/test_metrics.py checks the name),
# sent every 2 s.
OUTBOX_RELAY_TASK = "derivations.outbox_relay"


class OutboxRelayIdle(logging.Filter):
    """The outbox relay's routine lines only when it had work: beat's "Sending due task", the
    worker's "received" and a "succeeded ...: 0" (nothing to publish) would otherwise be three
    lines every 2 s, most of a quiet instance's log. A relay that published something
    ("succeeded ...: 3") is logged, and so is every warning and error (a send that failed, a
    relay that raised).

    Attached to the loggers Celery writes those lines with (``celery.beat``,
    ``celery.worker.strategy``, ``celery.app.trace``); the worker's lines carry their task's
    name and result in ``record.data``, beat's in its arguments."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno > logging.INFO:
            return True
        data = getattr(record, "data", None)
        if isinstance(data, dict) and data.get("name") == OUTBOX_RELAY_TASK:
            # "received" has no return value yet; "succeeded" has the count it published.
            return str(data.get("return_value", "0")) != "0"
        args = record.args
        return not (
            record.name == "celery.beat" and isinstance(args, tuple) and OUTBOX_RELAY_TASK in args
        )
