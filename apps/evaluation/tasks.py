"""The worker's side of an evaluation run asked for in the console.

Unlike the other tasks, the body does not run in one transaction: the run's progress must be
committed while it runs, and the sandbox holds its own transaction on its own connection
(:mod:`apps.evaluation.sandbox`).

The outbox row is finished as soon as the run is claimed: from then on the run row, whose
progress is its heartbeat, is what says how the work goes. A row left waiting for the
minutes a run takes would read as stalled work to the health check (and to ``up``, which
restarts such a worker) and be offered again by the relay. A copy of the message delivered
again while the run makes progress does nothing; one delivered after it stalled (its
worker died) starts it again; a run that stalled is failed when the next is asked for.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
from celery.contrib.django.task import DjangoTask

from apps.tenancy.context import tenant_scope
from apps.work.outbox import outbox_finish
from apps.work.tasks import OutboxTask

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


@shared_task(
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
    with tenant_scope(tenant_id):
        outbox_finish(outbox_id)
    return evaluation_run_execute(run=run).state
