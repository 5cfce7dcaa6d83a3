"""Work a change queues in its own transaction, which an app above may do at once instead.

A record write queues its version's embedding as an outbox row in the version's transaction,
for the worker (``apps.work.outbox``): that needs no app above records. Where the tenant's
model is fast enough, derivations embeds the version inside the write instead, so a search
right after the write finds it by meaning. The writer asks through an optional contract (such
as ``apps.records.signals.embed_record``); a receiver takes ``subject`` and ``stored`` and
returns True when it does the work at once: for a subject not yet stored, whether it will once
stored; for a stored one, whether it did, in the caller's transaction. Anything else (or no
receiver) leaves the work to the queued row.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from apps.core.contracts import Contract

from .models import OutboxMessage

_all_queued: ContextVar[bool] = ContextVar("memoryconsole_work_all_queued", default=False)


@contextmanager
def work_all_queued() -> Iterator[None]:
    """Inside the block, work a receiver would do at once (a record's embedding where the
    tenant's model embeds at write) is queued for the worker instead: a bulk change (a batch
    of writes, an import) must not spend its request's time on it, item after item."""
    token = _all_queued.set(True)
    try:
        yield
    finally:
        _all_queued.reset(token)


def work_queued_only() -> bool:
    """Whether the caller asked for all work to be queued (:func:`work_all_queued`); receivers
    that could do their work at once ask this first."""
    return _all_queued.get()


@dataclass(frozen=True)
class Planned:
    """The work about a new subject: ``rows`` for the caller to insert with it (the queued
    work, when no receiver does it at once), and the receivers that do it at once once it is
    stored (:meth:`stored`)."""

    work: Contract
    rows: list[OutboxMessage]
    at_once: list[Callable[..., Any]]
    enqueue: Callable[[Any], Any]

    def stored(self, subject: Any) -> None:
        """Call once ``subject`` is stored, in the same transaction: the receivers that meant
        to work at once do so, and if none could after all, the work is queued."""
        if not self.at_once:
            return
        done = [
            receiver(signal=self.work, sender=None, subject=subject, stored=True)
            for receiver in self.at_once
        ]
        if not any(answer is True for answer in done):
            self.enqueue(subject)


def work_planned(
    work: Contract,
    subject: Any,
    *,
    row: Callable[[Any], OutboxMessage],
    enqueue: Callable[[Any], Any],
) -> Planned:
    """The work of ``work`` about a new, not yet stored ``subject`` (module doc): its queued
    ``row`` (unsaved), unless a receiver does it at once; ``enqueue`` queues it for a stored
    subject should those receivers fail to do it after all."""
    at_once = [receiver for receiver, takes in work.answers(subject=subject, stored=False) if takes]
    return Planned(work, rows=[] if at_once else [row(subject)], at_once=at_once, enqueue=enqueue)


def work_enqueue(work: Contract, subject: Any, *, enqueue: Callable[[Any], Any]) -> None:
    """Do the work of ``work`` about the stored ``subject`` in the caller's transaction where
    a receiver does it at once, else queue it there (``enqueue``)."""
    if not any(answer is True for _, answer in work.answers(subject=subject, stored=True)):
        enqueue(subject)
