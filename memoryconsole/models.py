"""The platform's own table: when each task of beat's schedule last succeeded."""

from __future__ import annotations

from django.db import models


class ScheduledRun(models.Model):
    """One task of beat's schedule (``CELERY_BEAT_SCHEDULE``): since when it is expected to run
    and when a run sent by beat last succeeded in the worker. Health compares them with the
    task's interval, so scheduled work that stopped completing (beat unable to publish, a
    worker not taking its messages, a task that fails every time) is reported, not silent.
    No tenant: it names tasks, never what they touched."""

    task = models.CharField(max_length=200, primary_key=True)
    expected_since = models.DateTimeField()
    succeeded_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return self.task
