"""The transactional outbox: follow-up work written in the caller's transaction, published later.

``outbox_enqueue`` adds a row beside the change that wants the work; when that transaction
commits, the relay publishes it to Celery. If the process dies between the commit and the
publish, the row is still ``pending`` and the beat task (``derivations.outbox_relay``:
``apps.work.tasks``) publishes it. A row is ``published`` once handed to the broker, ``done``
when its task finished and ``dead`` when retries are exhausted (the Django admin lists those).

Outbox rows are tenant rows, visible only inside a tenant scope: the relay iterates the tenants
(the tenant table is not under RLS) and drains each inside its own ``tenant_scope``, rather
than keeping a tenant-less index table or a role that bypasses RLS. That costs one cheap
indexed query per tenant per tick; with tens of thousands of tenants, a tenant-less "has
pending work" marker table would be the next step. Tasks are published with the tenant in
the ``memoryconsole_tenant`` header (``TenantTask``) and receive ids only.

Embedding rows are not published one by one: the worker claims a batch of a tenant's rows
(``outbox_claim``: ``FOR UPDATE SKIP LOCKED``), embeds them in one call and marks them done in
the transaction that stores the vectors (``apps.derivations.embeddings``, whose tasks are
named below: the outbox knows no app above it). The broker carries only a wake-up for the
tenant (``derivations.embed_pending``, no ids): one per tenant per relay pass, and one per
writer's commit through a per-process coalescer, so a burst of writes sends a few messages. A
row's lease is its claiming transaction: a worker killed mid-batch rolls back and the rows are
claimable again; the relay wakes the tenant again for rows published longer than
``OUTBOX_REDELIVER_AFTER`` ago and still not done (their wake-up was lost with a worker).
"""

from __future__ import annotations

import logging
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from apps.tenancy.context import current_tenant_id, tenant_scope
from apps.tenancy.models import Tenant
from apps.tenancy.tasks import TENANT_HEADER

from .models import OutboxMessage, OutboxState

logger = logging.getLogger(__name__)

EMBED_RECORD = "derivations.embed_record"
EMBED_SUMMARY = "derivations.embed_summary"
# Rows of these tasks are claimed in batches by the embedding drain; their message is a wake-up.
EMBED_TASKS = (EMBED_RECORD, EMBED_SUMMARY)
EMBED_WAKEUP = "derivations.embed_pending"

# A row whose attempts failed this many times more than once is ``dead`` (the admin lists it,
# health counts it); before that each failure waits 2^attempts seconds (jittered, at most
# RETRY_BACKOFF_MAX) before the row may be claimed again.
MAX_RETRIES = 5
RETRY_BACKOFF_MAX = 600


def redeliver_after() -> timedelta:
    """The row is the unit of delivery and the broker message only a wake-up: a row published
    this long ago (``OUTBOX_REDELIVER_AFTER``) and still not done lost its message (a worker
    killed while holding it, a broker reset), and the relay offers it again; safe, since every
    task is idempotent."""
    return timedelta(seconds=settings.OUTBOX_REDELIVER_AFTER)


# With on-commit publishing, a pending row younger than this was most likely sent already.
ON_COMMIT_GRACE = timedelta(seconds=30)

Publisher = Callable[[OutboxMessage], None]
Waker = Callable[[Any], None]  # wakes the embedding drain of one tenant (by id)


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
    message = _unsaved(tenant_id, task_name, object_id, payload or {})
    message.save(force_insert=True)
    return message


def _unsaved(
    tenant_id: Any, task_name: str, object_id: Any, payload: dict[str, Any]
) -> OutboxMessage:
    """A new row, published once the caller's transaction commits (:func:`outbox_enqueue`)."""
    message = OutboxMessage(
        tenant_id=tenant_id,
        task_name=task_name,
        object_id=object_id,
        payload=payload,
        created_at=timezone.now(),
    )
    if getattr(settings, "OUTBOX_RELAY_ON_COMMIT", True):
        if task_name in EMBED_TASKS:
            transaction.on_commit(lambda: embedding_wakeup(tenant_id))
        else:
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
    # By name: the publishing process (a web worker) need not have imported the task module.
    current_app.send_task(
        message.task_name,
        kwargs={**message.payload, "outbox_id": str(message.pk)},
        headers={TENANT_HEADER: str(message.tenant_id)},
    )


def _due(now: datetime) -> Q:
    """Rows the relay should offer now: pending and available (with on-commit publishing,
    only those old enough to have missed it), or published so long ago that their message
    must have been lost."""
    pending = Q(state=OutboxState.PENDING) & (
        Q(available_at__isnull=True) | Q(available_at__lte=now)
    )
    if getattr(settings, "OUTBOX_RELAY_ON_COMMIT", True):
        # A row given back by a drain (failed, or its source was locked) has no commit that
        # publishes it: it is due as soon as it is available.
        pending &= Q(created_at__lt=now - ON_COMMIT_GRACE) | Q(available_at__isnull=False)
    stale = Q(state=OutboxState.PUBLISHED, published_at__lt=now - redeliver_after())
    return pending | stale


def outbox_relay_tenant(
    tenant_id: Any, *, limit: int = 500, publish: Publisher | None = None, wake: Waker | None = None
) -> int:
    """Offer up to ``limit`` of one tenant's due rows; returns how many.

    Embedding rows are marked ``published`` and covered by one wake-up of the tenant's
    embedding drain, sent once this transaction has committed (a drain started earlier would
    skip the rows this one still holds); every other row is published as its own task.
    ``SELECT ... FOR UPDATE SKIP LOCKED``: concurrent relays (the on-commit one and the beat
    one, or several beat workers) and a drain claiming rows take disjoint rows and never wait
    on each other.
    """
    publish = publish or publish_to_celery
    wake = wake or embedding_wakeup_send
    now = timezone.now()
    published = 0
    with tenant_scope(tenant_id):
        rows = list(
            OutboxMessage.objects.select_for_update(skip_locked=True)
            .filter(_due(now))
            .order_by("created_at")[:limit]
        )
        embedding_ids = [row.pk for row in rows if row.task_name in EMBED_TASKS]
        if embedding_ids:
            OutboxMessage.objects.filter(pk__in=embedding_ids).update(
                state=OutboxState.PUBLISHED, published_at=now
            )
            published += len(embedding_ids)
        for message in rows:
            if message.task_name in EMBED_TASKS:
                continue
            # Marked first: an eagerly run task (tests) may finish the row inside publish().
            OutboxMessage.objects.filter(pk=message.pk).update(
                state=OutboxState.PUBLISHED, published_at=now
            )
            publish(message)
            published += 1
    if embedding_ids:
        try:
            wake(tenant_id)
        except Exception:
            # Not woken: the rows go back to pending, so the next pass tries again at once
            # instead of waiting out the redelivery delay.
            with tenant_scope(tenant_id):
                OutboxMessage.objects.filter(
                    pk__in=embedding_ids, state=OutboxState.PUBLISHED, published_at=now
                ).update(state=OutboxState.PENDING)
            raise
    return published


def outbox_relay(
    limit: int = 500, *, publish: Publisher | None = None, wake: Waker | None = None
) -> int:
    """Offer due rows of every tenant (each inside its own tenant scope)."""

    if current_tenant_id() is not None:
        raise RuntimeError("outbox_relay runs across tenants; call it outside a tenant scope")
    total = 0
    for tenant_id in Tenant.objects.values_list("pk", flat=True):
        if total >= limit:
            break
        total += outbox_relay_tenant(tenant_id, limit=limit - total, publish=publish, wake=wake)
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
    return _unsaved(record.tenant_id, EMBED_RECORD, record.pk, {"record_id": str(record.pk)})


def summary_embedding_enqueue(summary: Any) -> OutboxMessage:
    """Queue the embedding of a summary (call inside the summary's transaction)."""
    return outbox_enqueue(
        tenant_id=summary.tenant_id,
        task_name=EMBED_SUMMARY,
        object_id=summary.pk,
        payload={"summary_id": str(summary.pk)},
    )


# --- claiming embedding rows (the drain's side) ------------------------------------------------


def outbox_claim(
    task_names: Sequence[str], *, limit: int, retried: bool, now: datetime
) -> list[OutboxMessage]:
    """Lock up to ``limit`` of the current tenant's unfinished rows of ``task_names`` that may
    be taken now, oldest first: with ``retried``, rows that failed before, else fresh ones.

    ``FOR UPDATE SKIP LOCKED``: rows another transaction holds (another drain's batch, a
    relay pass, a deletion removing them) are passed over, so two workers never claim one
    row. The rows are this transaction's lease: they are finished in it, or, if the worker
    dies, its rollback leaves them claimable again.
    """
    attempts = Q(attempts__gt=0) if retried else Q(attempts=0)
    return list(
        OutboxMessage.objects.select_for_update(skip_locked=True)
        .filter(task_name__in=task_names, state__in=[OutboxState.PENDING, OutboxState.PUBLISHED])
        .filter(Q(available_at__isnull=True) | Q(available_at__lte=now))
        .filter(attempts)
        .order_by("created_at")[:limit]
    )


def outbox_done(ids: Iterable[Any], *, now: datetime) -> int:
    """Mark claimed rows ``done`` (in the claiming transaction)."""
    return OutboxMessage.objects.filter(pk__in=list(ids)).update(
        state=OutboxState.DONE, finished_at=now
    )


def outbox_defer(ids: Iterable[Any], *, until: datetime) -> int:
    """Give claimed rows back, not to be taken again before ``until`` (their source was locked
    by another transaction); the relay offers them again once they are available."""
    return OutboxMessage.objects.filter(pk__in=list(ids)).update(
        state=OutboxState.PENDING, available_at=until
    )


def retry_delay(attempts: int) -> timedelta:
    """How long a row that has failed ``attempts`` times waits before it is taken again."""
    ceiling = min(2.0**attempts, RETRY_BACKOFF_MAX)
    return timedelta(seconds=ceiling * random.uniform(0.5, 1.0))  # noqa: S311 - jitter only


def outbox_failed(ids: Iterable[Any], *, error: str, now: datetime) -> int:
    """Count a failed attempt on each of ``ids`` (in a transaction of its own, after the
    failed one rolled back): it backs off, or is ``dead`` after its last retry. Returns how
    many are dead now."""
    # An empty list asks the database nothing (Django answers an empty IN itself).
    rows = OutboxMessage.objects.select_for_update().filter(
        pk__in=list(ids), state__in=[OutboxState.PENDING, OutboxState.PUBLISHED]
    )
    by_attempts: dict[int, list[Any]] = {}
    for pk, attempts in rows.values_list("pk", "attempts"):
        by_attempts.setdefault(attempts + 1, []).append(pk)
    dead = 0
    for attempts, pks in by_attempts.items():
        fields: dict[str, Any] = {"attempts": attempts, "last_error": error[:2000]}
        if attempts > MAX_RETRIES:
            fields.update(state=OutboxState.DEAD, finished_at=now)
            dead += len(pks)
        else:
            fields.update(state=OutboxState.PENDING, available_at=now + retry_delay(attempts))
        OutboxMessage.objects.filter(pk__in=pks).update(**fields)
    return dead


# --- wake-ups ---------------------------------------------------------------------------------


def embedding_wakeup_send(tenant_id: Any) -> None:
    """Send one wake-up of ``tenant_id``'s embedding drain: its tenant in the header, no
    arguments at all (the rows say what to do)."""
    current_app.send_task(EMBED_WAKEUP, headers={TENANT_HEADER: str(tenant_id)})


def embedding_wakeup_try(tenant_id: Any) -> None:
    """:func:`embedding_wakeup_send`, best effort: a broker that is down is logged, and the
    relay wakes the tenant later (its rows are still pending, or published and going stale)."""
    try:
        embedding_wakeup_send(tenant_id)
    except Exception:
        logger.warning("embedding wake-up failed; the beat relay will retry", exc_info=True)


# A burst of commits sends one wake-up per tenant and window from each process.
WAKEUP_WINDOW = 0.2


def _later(delay: float, call: Callable[[], None]) -> None:
    timer = threading.Timer(delay, call)
    timer.daemon = True  # a process that exits leaves the rest to the relay
    timer.start()


class WakeupCoalescer:
    """Turns many requests for a tenant's wake-up into at most one send per ``window``.

    The first request sends at once; a request within the window after a send schedules one
    more send at the window's end, and requests meanwhile join it. So every request is
    followed by a send that happens after it, which is what a commit needs: the drain this
    send wakes starts after the commit and sees its rows. ``clock`` and ``later`` (run a
    call after a delay: a timer thread) are replaceable for tests.
    """

    def __init__(
        self,
        window: float,
        send: Waker,
        *,
        clock: Callable[[], float] = time.monotonic,
        later: Callable[[float, Callable[[], None]], None] = _later,
    ) -> None:
        self.window, self.send, self.clock, self.later = window, send, clock, later
        self._lock = threading.Lock()
        self._last: dict[str, float] = {}
        self._scheduled: set[str] = set()

    def request(self, tenant_id: Any) -> None:
        key = str(tenant_id)
        with self._lock:
            if key in self._scheduled:
                return  # a send is scheduled, and it comes after this request
            last = self._last.get(key)
            wait = 0.0 if last is None else last + self.window - self.clock()
            if wait > 0:
                self._scheduled.add(key)
                self.later(wait, lambda: self._fire(key))
                return
            self._last[key] = self.clock()
        self.send(key)

    def _fire(self, key: str) -> None:
        with self._lock:
            self._scheduled.discard(key)
            self._last[key] = self.clock()
        self.send(key)


_coalescer = WakeupCoalescer(WAKEUP_WINDOW, embedding_wakeup_try)


def embedding_wakeup(tenant_id: Any) -> None:
    """Wake ``tenant_id``'s embedding drain soon (call after a commit that queued rows)."""
    _coalescer.request(tenant_id)
