"""Derivation work in the worker: thin, idempotent tasks that take ids, never content.

Each runs as the tenant named in its message header (``TenantTask``). Embeddings are not a task
per record: ``derivations.embed_pending`` is a wake-up carrying only its tenant, and the drain
it starts claims that tenant's queued embeddings from the outbox a batch per transaction
(``apps.derivations.embeddings.embeddings_drain``). A worker killed mid-batch rolls it back
and its rows are claimable again; a lost wake-up is sent again by the relay (``apps.work``).
Time limits stay far below the broker's visibility timeout (Redis: one hour), so a drain is
never delivered twice while still running.
"""

from __future__ import annotations

from typing import Any

from celery import shared_task

from apps.tenancy.tasks import TenantTask
from apps.work.outbox import EMBED_RECORD, EMBED_SUMMARY, EMBED_WAKEUP, embedding_wakeup_try

from .embeddings import embeddings_drain


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
