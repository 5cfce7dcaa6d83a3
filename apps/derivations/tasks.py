"""Derivation work in the worker: thin, idempotent tasks that take ids, never content.

Every task runs as the tenant named in its message header (``TenantTask``). Embeddings are
not a task per record: ``derivations.embed_pending`` is a wake-up carrying nothing but its
tenant, and the drain it starts claims that tenant's queued embeddings from the outbox in
batches, each batch one transaction (``apps.derivations.embeddings.embeddings_drain``).
A worker killed mid-batch rolls the batch back and its rows are claimable again; a lost
wake-up is sent again by the relay. The other tasks run in one transaction each, with
``acks_late`` + ``reject_on_worker_lost``; time limits stay far below the broker's visibility
timeout (Redis: one hour) so a slow task is never delivered twice while still running. After
the last retry a task's outbox row is marked ``dead``.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
from django.db.models import F

from apps.tenancy.context import tenant_scope
from apps.tenancy.tasks import TenantTask

from .embeddings import embeddings_drain
from .models import OutboxMessage, OutboxState
from .outbox import EMBED_RECORD, EMBED_SUMMARY, EMBED_WAKEUP, embedding_wakeup_try, outbox_relay

logger = logging.getLogger(__name__)


class OutboxTask(TenantTask):
    """Counts attempts and marks the outbox row ``dead`` when retries run out.

    The task body's transaction rolls back on failure, so the bookkeeping happens here, in a
    transaction of its own, as the task's tenant.
    """

    def _note(self, kwargs: dict[str, Any], exc: BaseException, *, dead: bool) -> None:
        tenant_id = self._tenant_from_request()
        outbox_id = kwargs.get("outbox_id")
        if tenant_id is None or not outbox_id:
            return
        fields: dict[str, Any] = {"attempts": F("attempts") + 1, "last_error": repr(exc)[:2000]}
        if dead:
            fields["state"] = OutboxState.DEAD
        try:
            with tenant_scope(tenant_id):
                OutboxMessage.objects.filter(pk=outbox_id).update(**fields)
        except Exception:
            logger.exception("could not record the failure of outbox row %s", outbox_id)

    def on_retry(self, exc: Any, task_id: Any, args: Any, kwargs: Any, einfo: Any) -> None:
        self._note(kwargs, exc, dead=False)

    def on_failure(self, exc: Any, task_id: Any, args: Any, kwargs: Any, einfo: Any) -> None:
        self._note(kwargs, exc, dead=True)


class WakeupTask(TenantTask):
    """A task whose body opens its tenant's scope itself, once per unit of work, so that each
    unit commits on its own; the tenant still comes from the message header only."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # Not TenantTask's one transaction around the whole body.
        return super(TenantTask, self).__call__(*args, **kwargs)


def _drain(task: WakeupTask) -> str:
    tenant_id = task._tenant_from_request()
    if tenant_id is None:
        return "no tenant"  # fail-closed: nothing of any tenant is visible without one
    # An eager call (tests, a shell) has no broker to wake another thread through.
    wake = None if task.request.is_eager else embedding_wakeup_try
    outcome = embeddings_drain(tenant_id, wake=wake)
    return f"{outcome.finished} done, {outcome.embedded} embedded, {outcome.deferred} deferred"


WAKEUP_OPTIONS: dict[str, Any] = {
    "base": WakeupTask,
    "bind": True,
    "acks_late": True,
    "reject_on_worker_lost": True,
    # A drain returns after its budget (a few seconds) and its last batch.
    "soft_time_limit": 60,
    "time_limit": 90,
}


@shared_task(name=EMBED_WAKEUP, **WAKEUP_OPTIONS)
def embed_pending(self: WakeupTask) -> str:
    """Embed the tenant's queued records and summaries, in batches (see the module doc)."""
    return _drain(self)


@shared_task(name=EMBED_RECORD, **WAKEUP_OPTIONS)
def embed_record(self: WakeupTask, record_id: str = "", outbox_id: str | None = None) -> str:
    """A message of the one-task-per-record era, still in a broker after an upgrade: a
    wake-up like any other (its row is claimed with the rest of the tenant's)."""
    return _drain(self)


@shared_task(name=EMBED_SUMMARY, **WAKEUP_OPTIONS)
def embed_summary(self: WakeupTask, summary_id: str = "", outbox_id: str | None = None) -> str:
    """As :func:`embed_record`, for a summary's message."""
    return _drain(self)


@shared_task(name="derivations.outbox_relay", acks_late=True, time_limit=60, soft_time_limit=50)
def outbox_relay_all(limit: int = 500) -> int:
    """The beat's relay: publishes whatever an on-commit relay did not (crash, broker down)."""

    return outbox_relay(limit)
