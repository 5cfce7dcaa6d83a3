"""The worker's side of an evaluation run asked for in the console.

Unlike the other tasks, the body does not run in one transaction: the run's progress must be
committed while it runs, and the sandbox holds its own transaction on its own connection
(:mod:`apps.evaluation.sandbox`). A copy delivered again while the run makes progress does
nothing (the relay offers a row again after ``OUTBOX_REDELIVER_AFTER``, shorter than a run);
one delivered after the run stalled (its worker died) starts it again.
"""

from __future__ import annotations

import logging
from typing import Any

from celery.contrib.django.task import DjangoTask

from apps.derivations.outbox import outbox_finish
from apps.derivations.tasks import OutboxTask
from apps.tenancy.context import tenant_scope
from memoryconsole.celery import app

from .selectors import evaluation_run_get
from .services import EVALUATION_RUN, evaluation_run_claim, evaluation_run_execute

logger = logging.getLogger(__name__)


class EvaluationRunTask(OutboxTask):
    """Takes the tenant from the message header like every task, but leaves transactions to
    the body."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["tenant_id"] = self._tenant_from_request()
        # DjangoTask's call, not TenantTask's: no transaction around the whole run.
        return DjangoTask.__call__(self, *args, **kwargs)


@app.task(
    name=EVALUATION_RUN,
    base=EvaluationRunTask,
    acks_late=True,
    reject_on_worker_lost=True,
    soft_time_limit=3300,
    time_limit=3500,
    max_retries=0,
)
def evaluation_run_task(
    run_id: str = "", outbox_id: str | None = None, tenant_id: str | None = None, **_: Any
) -> str:
    """Run one queued evaluation; finished or taken by another delivery: nothing to do."""
    if not run_id or not tenant_id:
        return "no run"
    run = evaluation_run_claim(run_id, tenant_id=tenant_id)
    if run is None:
        with tenant_scope(tenant_id):
            existing = evaluation_run_get(run_id)
            if existing is None or existing.finished:
                outbox_finish(outbox_id)
        return "running elsewhere or finished"
    try:
        finished = evaluation_run_execute(run=run)
    finally:
        with tenant_scope(tenant_id):
            outbox_finish(outbox_id)
    return finished.state
