"""Governance work in the worker: reclamation after deletions, and erasure jobs.

The task names keep the ``derivations.`` prefix they were scheduled and queued under (the beat
schedule in settings, messages already in a broker)."""

from __future__ import annotations

import logging

from celery import shared_task

from apps.core.database import MaintenanceBusy

from . import erasure_jobs as _erasure_jobs  # noqa: F401  (registers the erasure task)
from .reclamation import deletions_reclaim, deletions_rewrite

logger = logging.getLogger(__name__)


@shared_task(name="derivations.reclaim", acks_late=True, time_limit=1800, soft_time_limit=1700)
def reclaim_deleted() -> int:
    """Vacuum after deletions and record on each receipt when its rows were reclaimed. Skips
    its turn while other maintenance runs: a worker thread waiting out an index build would
    only hold the next reclamations up behind it."""
    try:
        return deletions_reclaim(wait=False)
    except MaintenanceBusy as exc:
        logger.info("%s", exc)
        return 0


@shared_task(name="derivations.rewrite", acks_late=True, time_limit=3600, soft_time_limit=3500)
def rewrite_deleted() -> int:
    """Rewrite the tables after deletions, so no data file keeps a deleted row's bytes, and
    record on each receipt when. Skips its turn while other maintenance runs."""
    try:
        return deletions_rewrite(wait=False)
    except MaintenanceBusy as exc:
        logger.info("%s", exc)
        return 0
