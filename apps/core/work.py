"""Work a lower layer's change asks of a higher layer, queued in the change's transaction.

A record write must queue the embedding of the version it wrote, in the same transaction as
the version; embeddings and their outbox are the derivations app's, above records. So the
writer names the kind of work and the app that does it registers, in its
``AppConfig.ready``, how a row of its outbox is made for that kind. An unregistered kind
raises: work asked for must never be dropped silently.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from django.db import models

# The embedding of a record version (derivations: apps/derivations/apps.py).
EMBED_RECORD = "embed-record"


@dataclass(frozen=True)
class WorkHandler:
    """How the app doing one kind of work queues it: ``message`` builds the unsaved outbox
    row the caller inserts (nothing is looked up: a new object has no pending work), or None
    when the work is done at once: the caller then calls ``enqueue`` once the object is
    stored; ``enqueue`` queues the work itself, or does it in the caller's transaction."""

    message: Callable[[Any], models.Model | None]
    enqueue: Callable[[Any], Any]


_handlers: dict[str, WorkHandler] = {}
_all_queued: ContextVar[bool] = ContextVar("memoryconsole_work_all_queued", default=False)


@contextmanager
def work_all_queued() -> Iterator[None]:
    """Inside the block, work a handler would do at once (a record's embedding where the
    tenant's model embeds at write) is queued for the worker instead: a bulk change (a batch
    of writes, an import) must not spend its request's time on it, item after item."""
    token = _all_queued.set(True)
    try:
        yield
    finally:
        _all_queued.reset(token)


def work_queued_only() -> bool:
    """Whether the caller asked for all work to be queued (:func:`work_all_queued`); handlers
    that could do their work at once ask this first."""
    return _all_queued.get()


def work_register(kind: str, handler: WorkHandler) -> None:
    _handlers[kind] = handler


def _handler(kind: str) -> WorkHandler:
    try:
        return _handlers[kind]
    except KeyError:
        raise LookupError(f"No app does work of kind {kind!r}.") from None


def work_message(kind: str, subject: Any) -> models.Model | None:
    """The unsaved outbox row of ``kind`` about a new ``subject``, for the caller to insert;
    None when the work is done at once (call :func:`work_enqueue` once ``subject`` is
    stored)."""
    return _handler(kind).message(subject)


def work_enqueue(kind: str, subject: Any) -> None:
    """Queue work of ``kind`` about the stored ``subject`` in the caller's transaction, or do
    it there where it is done at once."""
    _handler(kind).enqueue(subject)
