"""The transactional outbox: follow-up work written in the caller's transaction, published later.

``outbox_enqueue`` adds a row beside the change that wants the work; when that transaction
commits, the relay publishes it to Celery. If the process dies between the commit and the
publish, the row is still ``pending`` and the beat task (``derivations.outbox_relay``, every
few seconds) publishes it. A row is ``published`` once handed to the broker, ``done`` when its
task finished and ``dead`` when retries are exhausted (the Django admin lists those).

The relay and RLS: outbox rows are tenant rows, visible only inside a tenant scope. The relay
iterates the tenants (the tenant table is not under RLS) and drains each one inside its own
``tenant_scope``, rather than keeping a tenant-less index table or a role that bypasses RLS.
That keeps the one rule of this codebase (tenant rows are read only as their tenant) at the
cost of one cheap indexed query per tenant per tick; if tenants ever number in the tens of
thousands, a tenant-less "has pending work" marker table would be the next step.

Tasks are published with the tenant in the ``memoryconsole_tenant`` header (``TenantTask``),
so they run as that tenant, and they receive ids only: ``payload`` plus the outbox row's id.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.tenancy.context import current_tenant_id, tenant_scope

from .models import OutboxMessage, OutboxState

logger = logging.getLogger(__name__)

EMBED_RECORD = "derivations.embed_record"
EMBED_SUMMARY = "derivations.embed_summary"


def redeliver_after() -> timedelta:
    """The row is the unit of delivery and the broker message only a wake-up: a row published
    this long ago (``OUTBOX_REDELIVER_AFTER``) and still not done lost its message (a worker
    killed while holding it, a broker reset), and the relay offers it again; safe, since every
    task is idempotent."""
    return timedelta(seconds=settings.OUTBOX_REDELIVER_AFTER)


# With on-commit publishing, a pending row younger than this was most likely sent already.
ON_COMMIT_GRACE = timedelta(seconds=30)

Publisher = Callable[[OutboxMessage], None]


def outbox_enqueue(
    *, tenant_id: Any, task_name: str, object_id: Any, payload: dict[str, Any] | None = None
) -> OutboxMessage:
    """Add work for ``task_name`` about ``object_id`` in the caller's transaction.

    ``payload`` must hold ids only. When the transaction commits, the current tenant's outbox
    is relayed (best effort; the beat task covers a failure). A pending row for the same task
    and object is reused, so writing a record twice in one transaction queues one embedding.
    """
    existing = OutboxMessage.objects.filter(
        task_name=task_name, object_id=object_id, state=OutboxState.PENDING
    ).first()
    if existing is not None:
        return existing
    message = OutboxMessage.objects.create(
        tenant_id=tenant_id,
        task_name=task_name,
        object_id=object_id,
        payload=payload or {},
        created_at=timezone.now(),
    )
    if getattr(settings, "OUTBOX_RELAY_ON_COMMIT", True):
        transaction.on_commit(lambda: _publish_after_commit(message))
    return message


def _publish_after_commit(message: OutboxMessage) -> None:
    """Hand the task to the broker now, touching no database row (the writer's request must
    not pay for a second transaction). The row stays ``pending`` until the task finishes it;
    the beat relay re-sends only rows older than :data:`ON_COMMIT_GRACE`."""
    try:
        publish_to_celery(message)
    except Exception:  # the broker may be down; the beat relay publishes later
        logger.warning(
            "outbox publish after commit failed; the beat relay will retry", exc_info=True
        )


def publish_to_celery(message: OutboxMessage) -> None:
    """Send the row's task with its tenant in the header and ids only in the arguments."""
    from memoryconsole.celery import TENANT_HEADER, app

    # By name: the publishing process (a web worker) need not have imported the task module.
    app.send_task(
        message.task_name,
        kwargs={**message.payload, "outbox_id": str(message.pk)},
        headers={TENANT_HEADER: str(message.tenant_id)},
    )


def outbox_relay_tenant(
    tenant_id: Any, *, limit: int = 500, publish: Publisher | None = None
) -> int:
    """Publish up to ``limit`` of one tenant's pending rows; returns how many.

    ``SELECT ... FOR UPDATE SKIP LOCKED``: concurrent relays (the on-commit one and the beat
    one, or several beat workers) take disjoint rows and never wait on each other.
    """
    publish = publish or publish_to_celery
    now = timezone.now()
    published = 0
    with tenant_scope(tenant_id):
        pending = OutboxMessage.objects.select_for_update(skip_locked=True).filter(
            state=OutboxState.PENDING
        )
        if getattr(settings, "OUTBOX_RELAY_ON_COMMIT", True):
            pending = pending.filter(created_at__lt=now - ON_COMMIT_GRACE)
        rows = list(pending.order_by("created_at")[:limit])
        stale = list(
            OutboxMessage.objects.select_for_update(skip_locked=True)
            .filter(state=OutboxState.PUBLISHED, published_at__lt=now - redeliver_after())
            .order_by("published_at")[: max(limit - len(rows), 0)]
        )
        for message in [*rows, *stale]:
            # Marked first: an eagerly run task (tests) may finish the row inside publish().
            OutboxMessage.objects.filter(pk=message.pk).update(
                state=OutboxState.PUBLISHED, published_at=now
            )
            publish(message)
            published += 1
    return published


def outbox_relay(limit: int = 500, *, publish: Publisher | None = None) -> int:
    """Publish pending rows of every tenant (each inside its own tenant scope)."""
    from apps.tenancy.models import Tenant

    if current_tenant_id() is not None:
        raise RuntimeError("outbox_relay runs across tenants; call it outside a tenant scope")
    total = 0
    for tenant_id in Tenant.objects.values_list("pk", flat=True):
        if total >= limit:
            break
        total += outbox_relay_tenant(tenant_id, limit=limit - total, publish=publish)
    return total


def outbox_finish(outbox_id: Any, *, state: str = OutboxState.DONE, error: str = "") -> None:
    """Mark a row finished (``done``) or ``dead``, in the current tenant's transaction."""
    if not outbox_id:
        return
    try:
        pk = uuid.UUID(str(outbox_id))
    except ValueError:
        return
    fields: dict[str, Any] = {"state": state, "finished_at": timezone.now()}
    if error:
        fields["last_error"] = error[:2000]
    OutboxMessage.objects.filter(pk=pk).update(**fields)


def outbox_forget(object_ids: list[Any]) -> int:
    """Drop every outbox row about ``object_ids`` (their source is gone); returns how many."""
    if not object_ids:
        return 0
    deleted, _ = OutboxMessage.objects.filter(object_id__in=object_ids).delete()
    return deleted


def record_embedding_enqueue(record: Any) -> OutboxMessage:
    """Queue the embedding of a record version (call inside the write's transaction)."""
    return outbox_enqueue(
        tenant_id=record.tenant_id,
        task_name=EMBED_RECORD,
        object_id=record.pk,
        payload={"record_id": str(record.pk)},
    )


def record_embedding_message(record: Any) -> OutboxMessage:
    """The embedding of a record version created in the caller's transaction, as an unsaved
    row the write path inserts in the same statement as the version. A new version has no
    pending row to reuse, so nothing is looked up; publishing after commit is arranged as by
    :func:`outbox_enqueue`."""
    message = OutboxMessage(
        tenant_id=record.tenant_id,
        task_name=EMBED_RECORD,
        object_id=record.pk,
        payload={"record_id": str(record.pk)},
        created_at=timezone.now(),
    )
    if getattr(settings, "OUTBOX_RELAY_ON_COMMIT", True):
        transaction.on_commit(lambda: _publish_after_commit(message))
    return message


def summary_embedding_enqueue(summary: Any) -> OutboxMessage:
    """Queue the embedding of a summary (call inside the summary's transaction)."""
    return outbox_enqueue(
        tenant_id=summary.tenant_id,
        task_name=EMBED_SUMMARY,
        object_id=summary.pk,
        payload={"summary_id": str(summary.pk)},
    )
