"""Governance work in the worker: reclamation after deletions, and erasure jobs.

The task names keep the ``derivations.`` prefix they were scheduled and queued under (the beat
schedule in settings, messages already in a broker)."""

from __future__ import annotations

from celery import shared_task

from . import erasure_jobs as _erasure_jobs  # noqa: F401  (registers the erasure task)
from .reclamation import deletions_reclaim, deletions_rewrite


@shared_task(name="derivations.reclaim", acks_late=True, time_limit=1800, soft_time_limit=1700)
def reclaim_deleted() -> int:
    """Vacuum after deletions and record on each receipt when its rows were reclaimed."""
    return deletions_reclaim()


@shared_task(name="derivations.rewrite", acks_late=True, time_limit=3600, soft_time_limit=3500)
def rewrite_deleted() -> int:
    """Rewrite the tables after deletions, so no data file keeps a deleted row's bytes, and
    record on each receipt when."""
    return deletions_rewrite()
