"""Whether beat's scheduled work completes: reclamation, the broker purge, expiry compaction,
the idle-run sweep, the outbox relay...

The worker records each success of a task that beat sent (beat marks its messages with the
``celery_beat_task`` header); beat records, when it starts, which tasks it is to run. A task
is **overdue** when its last success (before the first one: the moment beat first scheduled
it) lies further back than its interval plus the larger of that interval and
``WORK_STALLED_AFTER``: a relay every 2 s is overdue after 122 s, a reclamation every 10
minutes after 20 minutes. Health says ``degraded`` while any is.

Nothing here knows why a task stopped completing (beat unable to publish, the broker away, the
worker not taking messages, the task failing each time): it reports that it did, which no
single process can see of itself.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from celery import signals
from django.conf import settings
from django.db import DatabaseError
from django.utils import timezone

from .models import ScheduledRun

logger = logging.getLogger(__name__)

BEAT_HEADER = "celery_beat_task"  # set by celery beat on every message it sends


@dataclass(frozen=True)
class ScheduledTask:
    name: str  # the schedule entry, e.g. "reclaim-deleted"
    task: str  # the task it sends, e.g. "derivations.reclaim"
    every_seconds: float
    last_succeeded_seconds_ago: float | None  # None: not once since beat first scheduled it
    waiting_seconds: float  # since the last success, or since beat first scheduled it
    overdue: bool


def _seconds(schedule: Any) -> float:
    if isinstance(schedule, int | float):
        return float(schedule)
    if isinstance(schedule, timedelta):
        return schedule.total_seconds()
    # A celery schedule object (crontab, solar...): its nominal interval.
    return float(schedule.run_every.total_seconds())


def beat_schedule() -> dict[str, tuple[str, float]]:
    """Each entry of ``CELERY_BEAT_SCHEDULE``: its task and interval in seconds."""
    return {
        name: (str(entry["task"]), _seconds(entry["schedule"]))
        for name, entry in settings.CELERY_BEAT_SCHEDULE.items()
    }


def overdue_after(every_seconds: float) -> float:
    """Seconds without a success after which a task run every ``every_seconds`` is overdue."""
    return every_seconds + max(every_seconds, float(settings.WORK_STALLED_AFTER))


def scheduled_runs_expect(now: datetime | None = None) -> None:
    """Record that beat is to run each scheduled task from now on (beat, when it starts); a
    task already recorded keeps the moment it was first expected."""
    now = now or timezone.now()
    ScheduledRun.objects.bulk_create(
        [ScheduledRun(task=task, expected_since=now) for task, _ in beat_schedule().values()],
        ignore_conflicts=True,
    )


def scheduled_run_succeeded(task: str, now: datetime | None = None) -> None:
    """Record that a run of ``task`` sent by beat has just succeeded (the worker)."""
    now = now or timezone.now()
    ScheduledRun.objects.bulk_create(
        [ScheduledRun(task=task, expected_since=now, succeeded_at=now)],
        update_conflicts=True,
        unique_fields=["task"],
        update_fields=["succeeded_at"],
    )


def scheduled_work(now: datetime | None = None) -> list[ScheduledTask]:
    """Each task of the schedule that beat has started running, with how long since it last
    succeeded and whether that is overdue. Empty before beat has ever started."""
    now = now or timezone.now()
    runs = {run.task: run for run in ScheduledRun.objects.all()}
    found = []
    for name, (task, every) in beat_schedule().items():
        run = runs.get(task)
        if run is None:
            continue
        since = run.succeeded_at or run.expected_since
        waiting = max(0.0, (now - since).total_seconds())
        found.append(
            ScheduledTask(
                name=name,
                task=task,
                every_seconds=every,
                last_succeeded_seconds_ago=(
                    max(0.0, (now - run.succeeded_at).total_seconds()) if run.succeeded_at else None
                ),
                waiting_seconds=waiting,
                overdue=waiting > overdue_after(every),
            )
        )
    return found


@signals.task_success.connect
def _record_scheduled_success(sender: Any = None, **kwargs: Any) -> None:
    """In the worker: a task beat sent has succeeded. A failure to record it is logged, never
    raised: the task's own work is done and committed."""
    request = getattr(sender, "request", None)
    if request is None:
        return
    # Message protocol 2 exposes custom headers as request attributes; an eager call keeps
    # them under ``headers``.
    if not (request.get(BEAT_HEADER) or (request.headers or {}).get(BEAT_HEADER)):
        return
    try:
        scheduled_run_succeeded(str(sender.name))
    except DatabaseError as exc:
        logger.warning("could not record the success of %s: %s", sender.name, exc)
