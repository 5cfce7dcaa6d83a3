"""Erasures asked for in the console, run by the worker through the transactional outbox.

An erasure may cover 100k records, longer than a web request should hold a connection. So
the console does not run it in the request: ``erasure_job_enqueue`` writes an outbox row
(and an ``erasure.request`` audit event) in the request's transaction. Once that commits the
request is acknowledged and cannot be lost: the beat relay publishes a row the on-commit
publish missed, and the task is ``acks_late`` (a killed worker's message runs again).

The task (``derivations.erasure_job``) runs ``erasure_run`` in one transaction as the tenant,
holding a lock on its outbox row for the whole run: the relay (``SKIP LOCKED``) cannot
republish a long erasure while it runs, and a redelivered copy waits for the lock, then sees
the row ``done`` and does nothing. The erasure and the row's ``done`` mark commit together,
so the console never shows "done" for an erasure that rolled back.

The outbox payload carries the selector and its value (an identifier of a subject, an owner
or a consent, never memory content) only until the erasure commits; then it is replaced by
the receipt's id and totals, so the identifier the erasure was about is not kept beside it
(the receipt keeps only its digest).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.utils import timezone
from django.utils.dateparse import parse_datetime

from apps.audit.models import DeletionReceipt
from apps.audit.services import Actor, audit_record, content_digest
from apps.tenancy.context import tenant_scope
from apps.tenancy.models import Tenant
from memoryconsole.celery import app

from .models import OutboxMessage, OutboxState
from .outbox import outbox_enqueue
from .services import DerivationRejected
from .tasks import OutboxTask

logger = logging.getLogger(__name__)

ERASURE_JOB = "derivations.erasure_job"
SELECTOR_LABELS = {"subject": "subject", "owner": "owner", "consent_ref": "consent reference"}


# --- the job ----------------------------------------------------------------------------------


def erasure_job_enqueue(
    *, tenant: Tenant, actor: Actor, selector: str, value: str, reason: str, records: int
) -> OutboxMessage:
    """Queue an erasure in the caller's transaction and audit the request.

    ``records`` is how many records matched when the person confirmed (shown as the scale
    of the work while it runs). Validates like ``erasure_run``, so a queued job cannot be
    refused later for its input.
    """
    from .erasure import SELECTORS

    if selector not in SELECTORS:
        raise DerivationRejected({"selector": ["Give one of subject, owner or consent_ref."]})
    if not value or len(value) > 200:
        raise DerivationRejected({"value": ["1 to 200 characters."]})
    if not reason.strip():
        raise DerivationRejected({"reason": ["Required, non-empty."]})
    job_id = uuid.uuid4()
    requested_at = timezone.now()
    message = outbox_enqueue(
        tenant_id=tenant.pk,
        task_name=ERASURE_JOB,
        object_id=job_id,
        payload={
            "selector": selector,
            "value": value,
            "reason": reason,
            "actor_type": actor.type,
            "actor_id": actor.id,
            "actor_label": actor.label,
            "records": records,
            "requested_at": requested_at.isoformat(),
        },
    )
    audit_record(
        tenant=tenant,
        actor=actor,
        action="erasure.request",
        object_type="erasure_job",
        object_id=str(message.pk),
        digest=content_digest({selector: value}),
        data={
            "selector": selector,
            "records_matched": records,
            "reason": reason,
            "target": {selector: value},
        },
    )
    return message


@dataclass(frozen=True)
class ErasureJob:
    """A console erasure as its outbox row tells it."""

    id: str
    state: str  # queued | running | done | failed
    selector: str
    requested_by: str
    requested_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    records_matched: int
    receipt_id: str | None
    totals: dict[str, int]
    error: str

    @property
    def finished(self) -> bool:
        return self.state in {"done", "failed"}

    @property
    def selector_label(self) -> str:
        return SELECTOR_LABELS.get(self.selector, self.selector)


def _as_job(message: OutboxMessage) -> ErasureJob:
    payload = message.payload if isinstance(message.payload, dict) else {}
    if message.state == OutboxState.DONE:
        state = "done"
    elif message.state == OutboxState.DEAD:
        state = "failed"
    elif payload.get("started_at"):
        state = "running"
    else:
        state = "queued"
    totals = payload.get("totals")
    return ErasureJob(
        id=str(message.pk),
        state=state,
        selector=str(payload.get("selector", "")),
        requested_by=str(payload.get("actor_label", "")),
        requested_at=message.created_at,
        started_at=parse_datetime(str(payload["started_at"]))
        if payload.get("started_at")
        else None,
        finished_at=message.finished_at,
        records_matched=int(payload.get("records") or 0),
        receipt_id=str(payload["receipt_id"]) if payload.get("receipt_id") else None,
        totals=totals if isinstance(totals, dict) else {},
        error=message.last_error if state == "failed" else "",
    )


def erasure_job_get(job_id: Any) -> ErasureJob | None:
    """A console erasure of the current tenant by id, or None (missing or another tenant's)."""
    try:
        pk = uuid.UUID(str(job_id))
    except (ValueError, TypeError):
        return None
    message = OutboxMessage.objects.filter(pk=pk, task_name=ERASURE_JOB).first()
    return _as_job(message) if message else None


def erasure_jobs_recent(limit: int = 10) -> list[ErasureJob]:
    """The current tenant's latest console erasures, newest first (two indexed queries).

    Found through their ``erasure.request`` audit events (indexed by tenant and action), not
    by scanning the outbox, which holds a row for every embedding ever queued.
    """
    from apps.audit.models import AuditEvent

    job_ids = list(
        AuditEvent.objects.filter(action="erasure.request", object_type="erasure_job")
        .order_by("-seq")
        .values_list("object_id", flat=True)[:limit]
    )
    messages = OutboxMessage.objects.filter(pk__in=job_ids, task_name=ERASURE_JOB)
    by_id = {str(m.pk): m for m in messages}
    return [_as_job(by_id[pk]) for pk in job_ids if pk in by_id]


class ErasureJobTask(OutboxTask):
    """Notes the start of the run in a transaction of its own, before the erasure's, so the
    console can tell "running" from "waiting for a worker" while the erasure is invisible."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        tenant_id = self._tenant_from_request()
        outbox_id = kwargs.get("outbox_id")
        if tenant_id and outbox_id:
            try:
                with tenant_scope(tenant_id):
                    # SKIP LOCKED: a row locked by a run in progress (this is a second
                    # delivery) keeps its start time; the body below then waits and finds it
                    # done. Never rewrites a finished row's payload.
                    message = (
                        OutboxMessage.objects.select_for_update(skip_locked=True)
                        .filter(
                            pk=outbox_id,
                            task_name=ERASURE_JOB,
                            state__in=[OutboxState.PENDING, OutboxState.PUBLISHED],
                        )
                        .first()
                    )
                    if message is not None and isinstance(message.payload, dict):
                        payload = {**message.payload, "started_at": timezone.now().isoformat()}
                        OutboxMessage.objects.filter(pk=message.pk).update(payload=payload)
            except Exception:  # only the progress display depends on it
                logger.warning("could not note the start of erasure %s", outbox_id, exc_info=True)
        return super().__call__(*args, **kwargs)


@app.task(
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
def erasure_job_run(
    selector: str = "",
    value: str = "",
    reason: str = "",
    actor_type: str = "",
    actor_id: str = "",
    actor_label: str = "",
    outbox_id: str | None = None,
    **_ignored: Any,
) -> str:
    """Run one queued erasure; a copy delivered again after it finished does nothing."""
    from .erasure import erasure_run

    if not outbox_id:
        return "no outbox row"
    # Locked for the whole run: the relay skips it, and a second delivery waits here.
    message = (
        OutboxMessage.objects.select_for_update()
        .filter(pk=outbox_id, task_name=ERASURE_JOB)
        .first()
    )
    if message is None or message.state in {OutboxState.DONE, OutboxState.DEAD}:
        return "already finished"
    tenant = Tenant.objects.get(pk=message.tenant_id)
    actor = Actor(type=actor_type, id=actor_id, label=actor_label)
    try:
        result = erasure_run(
            tenant=tenant, actor=actor, selector=selector, value=value, reason=reason
        )
    except DerivationRejected as rejected:
        OutboxMessage.objects.filter(pk=message.pk).update(
            state=OutboxState.DEAD,
            finished_at=timezone.now(),
            last_error=f"refused: {rejected.errors}"[:2000],
            payload={"selector": selector, "actor_label": actor_label},
        )
        return "refused"
    payload = message.payload if isinstance(message.payload, dict) else {}
    OutboxMessage.objects.filter(pk=message.pk).update(
        state=OutboxState.DONE,
        finished_at=timezone.now(),
        payload={
            "selector": selector,
            "actor_label": actor_label,
            "records": payload.get("records", 0),
            "started_at": payload.get("started_at"),
            "receipt_id": str(result.receipt.pk),
            "totals": result.totals,
        },
    )
    return str(result.receipt.pk)


def erasure_receipt_for(job: ErasureJob) -> DeletionReceipt | None:
    """The summary receipt of a finished job (None while it runs)."""
    if not job.receipt_id:
        return None
    return DeletionReceipt.objects.filter(pk=job.receipt_id).first()
