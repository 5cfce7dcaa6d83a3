from __future__ import annotations

from django.apps import AppConfig


class WorkConfig(AppConfig):
    """The outbox: work that follows a change, written in the change's own transaction and
    done by the worker (a version's embedding, a summary's, an erasure job, an evaluation
    run), and the way an app above may do some of it at once instead (``queued``). Below
    records, so the write path queues its work itself: no app above need be connected."""

    name = "apps.work"
    label = "work"
