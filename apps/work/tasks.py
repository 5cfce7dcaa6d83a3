"""The outbox's own tasks: the beat's relay, and the base of tasks that finish an outbox row.

A task run from an outbox row takes ids only, plus the row's id (``outbox_id``). Its body runs
in one transaction as its tenant (``TenantTask``), with ``acks_late`` + ``reject_on_worker_lost``;
after the last retry its row is marked ``dead`` (:class:`OutboxTask`).
"""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
from django.db.models import F

from apps.tenancy.context import tenant_scope
from apps.tenancy.tasks import TenantTask

from .models import OutboxMessage, OutboxState
from .outbox import outbox_relay

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


# The name it had when the outbox was the derivations app's: the beat schedule names it
# (settings.CELERY_BEAT_SCHEDULE, and django-celery-beat's rows of existing installations).
@shared_task(name="derivations.outbox_relay", acks_late=True, time_limit=60, soft_time_limit=50)
def outbox_relay_all(limit: int = 500) -> int:
    """The beat's relay: publishes whatever an on-commit relay did not (crash, broker down)."""

    return outbox_relay(limit)
