"""Derivation work in the worker: thin, idempotent tasks that take ids, never content.

Every task runs as the tenant named in its message header (``TenantTask``), in one
transaction. ``acks_late`` + ``reject_on_worker_lost``: a worker killed mid-task leaves the
message on the broker and it runs again; the upsert keyed on (record or summary, model) makes
that second run update the same row instead of adding one. Time limits stay far below the
broker's visibility timeout (Redis: one hour) so a slow task is never delivered twice while
still running. After the last retry the outbox row is marked ``dead``.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db.models import F

from apps.tenancy.context import tenant_scope
from memoryconsole.celery import TenantTask, app

from .models import OutboxMessage, OutboxState

logger = logging.getLogger(__name__)

MAX_RETRIES = 5


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


TASK_OPTIONS: dict[str, Any] = {
    "base": OutboxTask,
    "acks_late": True,
    "reject_on_worker_lost": True,
    "soft_time_limit": 60,
    "time_limit": 90,
    "autoretry_for": (Exception,),
    "retry_backoff": True,
    "retry_backoff_max": 600,
    "retry_jitter": True,
    "max_retries": MAX_RETRIES,
}


@app.task(name="derivations.embed_record", **TASK_OPTIONS)
def embed_record(record_id: str, outbox_id: str | None = None) -> str:
    """Embed a record version with its tenant's model. A deleted record: nothing to do."""
    from .embeddings import record_embed
    from .outbox import outbox_finish

    outcome = record_embed(record_id)
    outbox_finish(outbox_id)
    return outcome


@app.task(name="derivations.embed_summary", **TASK_OPTIONS)
def embed_summary(summary_id: str, outbox_id: str | None = None) -> str:
    """Embed a valid summary. An invalidated or deleted one: nothing to do."""
    from .embeddings import summary_embed
    from .outbox import outbox_finish

    outcome = summary_embed(summary_id)
    outbox_finish(outbox_id)
    return outcome


@app.task(name="derivations.outbox_relay", acks_late=True, time_limit=60, soft_time_limit=50)
def outbox_relay_all(limit: int = 500) -> int:
    """The beat's relay: publishes whatever an on-commit relay did not (crash, broker down)."""
    from .outbox import outbox_relay

    return outbox_relay(limit)


@app.task(name="derivations.reclaim", acks_late=True, time_limit=1800, soft_time_limit=1700)
def reclaim_deleted() -> int:
    """Vacuum after deletions and record on each receipt when its rows were reclaimed."""
    from .reclamation import deletions_reclaim

    return deletions_reclaim()


@app.task(name="derivations.rewrite", acks_late=True, time_limit=3600, soft_time_limit=3500)
def rewrite_deleted() -> int:
    """Rewrite the tables after deletions, so no data file keeps a deleted row's bytes, and
    record on each receipt when."""
    from .reclamation import deletions_rewrite

    return deletions_rewrite()


# Registers the console's erasure task (``derivations.erasure_job``) wherever tasks load.
from . import erasure_jobs as _erasure_jobs  # noqa: E402, F401
