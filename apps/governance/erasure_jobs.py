"""Erasures too large for a request, run by the worker: an ``ErasureJob`` and an outbox row.

An erasure may cover 100k records, longer than a request should hold a connection: above
``settings.ERASURE_JOB_THRESHOLD_RECORDS`` (the console: always) ``erasure_job_enqueue``
writes the job, an outbox row naming it and an ``erasure.request`` audit event in the
request's transaction; once that commits the request cannot be lost (the beat relay publishes
a row the on-commit publish missed; the task is ``acks_late``).

The task runs ``erasure_run`` in one transaction as the tenant, holding the job row's lock:
a redelivered copy waits, then finds the job ``done``. The erasure and ``done`` commit
together, so no one is told "done" for an erasure that rolled back. The job keeps the
selector's value (an identifier, never content) only until the erasure commits; then only
its digest, as on the receipt.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Any

from celery import shared_task
from django.db.models import QuerySet
from django.utils import timezone

from apps.audit.services import audit_record, content_digest
from apps.core.actors import Actor
from apps.derivations.services import DerivationRejected
from apps.tenancy.context import tenant_scope
from apps.tenancy.models import Tenant
from apps.work.models import OutboxState
from apps.work.outbox import outbox_enqueue, outbox_finish
from apps.work.tasks import OutboxTask

from .erasure import erasure_input_check, erasure_run
from .models import ErasureJob, ErasureJobState

logger = logging.getLogger(__name__)

ERASURE_JOB = "derivations.erasure_job"


def erasure_job_enqueue(
    *, tenant: Tenant, actor: Actor, selector: str, value: str, reason: str, records: int
) -> ErasureJob:
    """Queue an erasure in the caller's transaction and audit the request. ``records``: how
    many matched when asked (the scale shown while it runs). Validated as ``erasure_run``
    validates, so a queued job is never refused later for its input."""
    erasure_input_check(selector, value, reason, by_field=True)
    digest = content_digest({selector: value})
    job = ErasureJob.objects.create(
        tenant=tenant,
        selector=selector,
        value=value,
        value_digest=digest,
        reason=reason,
        **actor.fields("requested_by"),
        requested_at=timezone.now(),
        records_matched=records,
    )
    outbox_enqueue(
        tenant_id=tenant.pk,
        task_name=ERASURE_JOB,
        object_id=job.pk,
        payload={"job_id": str(job.pk)},
    )
    audit_record(
        tenant=tenant,
        actor=actor,
        action="erasure.request",
        object_type="erasure_job",
        object_id=str(job.pk),
        digest=digest,
        data={
            "selector": selector,
            "records_matched": records,
            "reason": reason,
            "target": {selector: value},
        },
    )
    return job


def erasure_job_get(job_id: Any) -> ErasureJob | None:
    """An erasure job of the current tenant by id, or None (missing or another tenant's)."""
    try:
        pk = uuid.UUID(str(job_id))
    except (ValueError, TypeError):
        return None
    return ErasureJob.objects.select_related("receipt").filter(pk=pk).first()


def erasure_jobs_recent(limit: int = 10) -> list[ErasureJob]:
    """The current tenant's latest erasure jobs, newest first (one indexed query)."""
    return list(ErasureJob.objects.order_by("-requested_at", "-id")[:limit])


def erasure_jobs_in(state: str) -> QuerySet[ErasureJob]:
    """The current tenant's erasure jobs in ``state`` (an ``ErasureJobState``)."""
    return ErasureJob.objects.filter(state=state)


class ErasureJobTask(OutboxTask):
    """Notes the start of the run in a transaction before the erasure's (so "running" shows
    while the erasure is invisible), and the job's failure when its retries run out."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        def start(jobs: QuerySet[ErasureJob]) -> None:
            # SKIP LOCKED: a job locked by a run in progress (this is a second delivery) keeps
            # its start time; the body then waits and finds it done.
            queued = jobs.select_for_update(skip_locked=True).filter(state=ErasureJobState.QUEUED)
            if queued.first() is not None:
                jobs.update(state=ErasureJobState.RUNNING, started_at=timezone.now())

        # Only the progress display depends on it.
        self._job_update(kwargs, start, "could not note the start of erasure %s", logging.WARNING)
        return super().__call__(*args, **kwargs)

    def on_failure(self, exc: Any, task_id: Any, args: Any, kwargs: Any, einfo: Any) -> None:
        super().on_failure(exc, task_id, args, kwargs, einfo)
        self._job_update(
            kwargs,
            lambda jobs: jobs.filter(
                state__in=[ErasureJobState.QUEUED, ErasureJobState.RUNNING]
            ).update(
                state=ErasureJobState.FAILED,
                finished_at=timezone.now(),
                error=f"failed: {exc!r}"[:2000],
            ),
            "could not record the failure of erasure %s",
            logging.ERROR,
        )

    def _job_update(
        self,
        kwargs: dict[str, Any],
        update: Callable[[QuerySet[ErasureJob]], Any],
        failure: str,
        level: int,
    ) -> None:
        """``update`` the job the task's ``kwargs`` name, as its tenant; logs a failure."""
        tenant_id = self._tenant_from_request()
        job_id = kwargs.get("job_id") or kwargs.get("outbox_id")
        if tenant_id and job_id:
            try:
                with tenant_scope(tenant_id):
                    update(ErasureJob.objects.filter(pk=job_id))
            except Exception:
                logger.log(level, failure, job_id, exc_info=True)


@shared_task(
    name=ERASURE_JOB,
    base=ErasureJobTask,
    acks_late=True,
    reject_on_worker_lost=True,
    # Far below the broker's visibility timeout (Redis: one hour), like the reclaim task.
    soft_time_limit=1700,
    time_limit=1800,
    autoretry_for=(Exception,),
    retry_backoff=True,
    retry_backoff_max=600,
    max_retries=3,
)
def erasure_job_run(job_id: str = "", outbox_id: str | None = None, **_ignored: Any) -> str:
    """Run one queued erasure; a copy delivered again after it finished does nothing.

    (A job moved out of an outbox payload by migration 0006 has its outbox row's id.)"""

    job_id = job_id or outbox_id or ""
    if not job_id:
        return "no job"
    # Locked for the whole run: a second delivery waits here.
    job = ErasureJob.objects.select_for_update().filter(pk=job_id).first()
    if job is None or job.finished:
        outbox_finish(outbox_id)
        return "already finished"
    tenant = Tenant.objects.get(pk=job.tenant_id)
    actor = Actor(type=job.requested_by_type, id=job.requested_by_id, label=job.requested_by_label)
    try:
        result = erasure_run(
            tenant=tenant, actor=actor, selector=job.selector, value=job.value, reason=job.reason
        )
    except DerivationRejected as rejected:
        error = f"refused: {rejected.errors}"[:2000]
        ErasureJob.objects.filter(pk=job.pk).update(
            state=ErasureJobState.FAILED, error=error, value="", finished_at=timezone.now()
        )
        outbox_finish(outbox_id, state=OutboxState.DEAD, error=error)
        return "refused"
    finished = timezone.now()
    ErasureJob.objects.filter(pk=job.pk).update(
        state=ErasureJobState.DONE,
        value="",
        finished_at=finished,
        started_at=job.started_at or finished,
        totals=result.totals,
        records_erased=result.totals.get("records", 0),
        receipt=result.receipt,
    )
    outbox_finish(outbox_id)
    return str(result.receipt.pk)
