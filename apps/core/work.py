"""Work a lower layer's change asks of a higher layer, queued in the change's transaction.

A record write must queue the embedding of the version it wrote, in the same transaction as
the version; embeddings and their outbox are the derivations app's, above records. So the
writer sends the work's contract (:data:`EMBED_RECORD`, a signal: apps/core/contracts.py) and
the app doing the work receives it (apps/derivations/receivers.py). Every version must be
embedded: the contract is required, so start-up fails without a receiver and a write raises
rather than dropping the work.

A receiver takes ``subject`` and ``stored``. For a new subject not yet stored
(``stored=False``) it returns the unsaved outbox row the caller inserts with it (nothing is
looked up: a new object has no pending work), or None when it does the work at once, once the
subject is stored. For a stored subject (``stored=True``) it queues the work, or does it, in
the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from django.db import models

from .contracts import Contract

# The embedding of a record version (received by derivations: apps/derivations/receivers.py).
EMBED_RECORD = Contract(
    "core.embed_record",
    required="every version written is embedded, or its embedding queued, in its transaction",
)

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
    """The work about a new subject: ``rows`` for the caller to insert with it, and the
    receivers that work at once once it is stored (:meth:`stored`)."""

    work: Contract
    rows: list[models.Model]
    at_once: list[Callable[..., Any]]

    def stored(self, subject: Any) -> None:
        """Call once ``subject`` is stored, in the same transaction."""
        for receiver in self.at_once:
            receiver(signal=self.work, sender=None, subject=subject, stored=True)


def work_planned(work: Contract, subject: Any) -> Planned:
    """The work of ``work`` about a new, not yet stored ``subject`` (module doc)."""
    answers = work.answers(subject=subject, stored=False)
    return Planned(
        work,
        rows=[row for _, row in answers if row is not None],
        at_once=[receiver for receiver, row in answers if row is None],
    )


def work_enqueue(work: Contract, subject: Any) -> None:
    """Queue the work of ``work`` about the stored ``subject`` in the caller's transaction,
    or do it there where it is done at once."""
    work.answers(subject=subject, stored=True)
