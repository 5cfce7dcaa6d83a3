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

One beat per database: two would send every scheduled task twice (two reclamations, two
index builds at once). Beat holds a PostgreSQL advisory lock (:class:`BeatLock`) for its whole
life, on a connection of its own: a second beat waits for it, saying so, and takes over when
the first stops (a rolling upgrade's hand-over). The lock is a session's, so a beat that dies
however it dies releases it with its connection.
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any

from django.db import Error as DatabaseError
from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django_celery_beat.schedulers import DatabaseScheduler

from .scheduled import scheduled_runs_expect

logger = logging.getLogger(__name__)

# pg_try_advisory_lock(namespace, object): the product's namespace ("MC"), object 1 is beat.
# Advisory locks belong to one database, so instances sharing a server do not meet.
LOCK_NAMESPACE = 0x4D43
BEAT_LOCK_OBJECT = 1
# While another beat holds the lock: try again this often, say so again this often.
LOCK_WAIT_POLL = 5.0
LOCK_WAIT_SAY_EVERY = 600.0
# How often a running beat makes sure it still holds the lock (a restarted database ends
# every session, and the lock with it).
LOCK_CHECK_EVERY = 15.0
BEAT_LOCK_KEY = [LOCK_NAMESPACE, BEAT_LOCK_OBJECT]
# Two int4 keys show in pg_locks as classid, objid and objsubid 2.
HELD_SQL = (
    "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted "
    "AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
    "AND classid = %s AND objid = %s AND objsubid = 2"
)
ANOTHER_BEAT = (
    "another Celery beat holds this database's beat lock: only one beat may run per "
    "database (it would send every scheduled task twice)"
)


class BeatLockLost(RuntimeError):
    """The lock went with the database's restart and another beat has taken it since."""


class BeatLock:
    """The advisory lock that makes one beat the only one, on a database connection of its
    own (not Django's: the scheduler closes that one between ticks, which would let the lock
    go)."""

    def __init__(self, alias: str = "default") -> None:
        self.alias = alias
        self.connection: BaseDatabaseWrapper | None = None
        self.next_check = 0.0
        self.unreachable = False  # the last check could not reach the database

    def _cursor(self) -> Any:
        if self.connection is None:
            self.connection = connections.create_connection(self.alias)
        return self.connection.cursor()

    def try_acquire(self) -> bool:
        """Take the lock unless another session holds it; True when this one holds it."""
        if self.held():
            return True
        with self._cursor() as cursor:
            cursor.execute(
                "SELECT pg_try_advisory_lock(%s, %s)", [LOCK_NAMESPACE, BEAT_LOCK_OBJECT]
            )
            return bool(cursor.fetchone()[0])

    def held(self) -> bool:
        """This lock's connection holds the lock now (False without a connection)."""
        if self.connection is None:
            return False
        with self._cursor() as cursor:
            cursor.execute(HELD_SQL + " AND pid = pg_backend_pid())", BEAT_LOCK_KEY)
            return bool(cursor.fetchone()[0])

    def acquire_or_wait(self) -> None:
        """Take the lock, waiting (and saying so) while another beat holds it."""
        said = None
        while not self.try_acquire():
            now = time.monotonic()
            if said is None or now - said >= LOCK_WAIT_SAY_EVERY:
                logger.warning("beat: %s; waiting for it to stop", ANOTHER_BEAT)
                said = now
            time.sleep(LOCK_WAIT_POLL)
        if said is not None:
            logger.warning("beat: took the beat lock; scheduling from now on")

    def keep(self) -> None:
        """At most every ``LOCK_CHECK_EVERY`` seconds: make sure the lock is still this
        beat's, taking it again after the database restarted. While the database cannot be
        reached beat goes on (it can send nothing anyway, and must not stop for a restart);
        raises :class:`BeatLockLost` when another beat took the lock meanwhile."""
        now = time.monotonic()
        if now < self.next_check:
            return
        self.next_check = now + LOCK_CHECK_EVERY
        try:
            if self.held():
                return
        except DatabaseError:
            self.release()  # a connection the database's restart ended
        try:
            acquired = self.try_acquire()
        except DatabaseError as exc:
            if not self.unreachable:
                logger.warning(
                    "beat: cannot check the beat lock (%s); taking it again when the database "
                    "answers",
                    str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__,
                )
            self.unreachable = True
            self.release()
            return
        if not acquired:
            raise BeatLockLost(ANOTHER_BEAT + " (it took the lock while the database restarted)")
        if self.unreachable:
            logger.warning("beat: holds the beat lock again")
        self.unreachable = False

    def release(self) -> None:
        """Close the lock's connection, which releases the lock."""
        if self.connection is not None:
            # A connection already broken: the server released the lock with it.
            with contextlib.suppress(DatabaseError):
                self.connection.close()
            self.connection = None


def beat_lock_held(connection: BaseDatabaseWrapper) -> bool:
    """Some session holds beat's lock in this database (``healthcheck beat``)."""
    with connection.cursor() as cursor:
        cursor.execute(HELD_SQL + ")", BEAT_LOCK_KEY)
        return bool(cursor.fetchone()[0])


class Scheduler(DatabaseScheduler):  # type: ignore[misc]  # django-celery-beat ships no types
    beat_lock: BeatLock | None = None

    def setup_schedule(self) -> None:
        # Before anything is scheduled: a second beat waits here.
        self.beat_lock = BeatLock()
        self.beat_lock.acquire_or_wait()
        super().setup_schedule()
        scheduled_runs_expect()

    def tick(self, *args: Any, **kwargs: Any) -> Any:
        if self.beat_lock is not None:
            try:
                self.beat_lock.keep()
            except BeatLockLost as exc:
                # Logged here: celery's service loop ends quietly on SystemExit.
                logger.critical("beat: stopping: %s", exc)
                raise SystemExit(1) from exc
        return super().tick(*args, **kwargs)

    def close(self) -> None:
        super().close()
        if self.beat_lock is not None:
            self.beat_lock.release()

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
