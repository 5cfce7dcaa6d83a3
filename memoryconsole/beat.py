"""Celery beat's scheduler (``CELERY_BEAT_SCHEDULER``): django-celery-beat's, which keeps the
schedule in the database, made to recover from a broker that went away.

Beat publishes through one producer that it keeps for its whole life. When the broker's
server goes away (the embedded PostgreSQL restarted by anyone), kombu's retry of a publish
reconnects twice over (once for the publish, once for declaring its queue) and can leave the
producer on a channel it closed itself. Every later publish then fails with "channel
disconnected", which kombu's SQL transport does not count as a connection error, so nothing
ever reconnects it: beat ran, logged and sent nothing until it was restarted. Here a send that
fails drops the producer and its connection, and the next send opens new ones.

Beat also records, when it starts, which scheduled tasks it is to run
(:func:`memoryconsole.scheduled.scheduled_runs_expect`), so health can tell one that never
succeeded from one that was never scheduled.
"""

from __future__ import annotations

import logging
from typing import Any

from django_celery_beat.schedulers import DatabaseScheduler

from .scheduled import scheduled_runs_expect

logger = logging.getLogger(__name__)


class Scheduler(DatabaseScheduler):  # type: ignore[misc]  # django-celery-beat ships no types
    def setup_schedule(self) -> None:
        super().setup_schedule()
        scheduled_runs_expect()

    def apply_async(
        self, entry: Any, producer: Any = None, advance: bool = True, **kwargs: Any
    ) -> Any:
        try:
            return super().apply_async(entry, producer=producer, advance=advance, **kwargs)
        except Exception:
            self.publisher_reset()
            raise

    def publisher_reset(self) -> None:
        """Forget the producer and close its connection; the next send opens new ones (as
        celery's own ``Scheduler.close`` does, without ending the scheduler)."""
        self.__dict__.pop("producer", None)
        connection = self.__dict__.pop("connection", None)
        if connection is not None:
            try:
                connection.release()
            except Exception:  # a connection already broken: nothing left to close
                logger.debug("beat: closing the broken broker connection failed", exc_info=True)
