"""Lag-tolerant reads on PostgreSQL streaming replicas (``DATABASE_REPLICA_URLS``).

Nothing here runs unless replicas are configured (``settings.REPLICA_DATABASES``): every read
then stays on the primary, as on a single machine.

* **Which reads.** Only handlers marked with :func:`replica_read` (a context search, the record
  listing and detail, facts without ``fresh``) may read a replica; everything else (writes,
  review decisions, decision searches, obligations and checkpoints, the console) reads the
  primary. A marked handler reads the replica through :class:`ReplicaRouter` (the ORM) and
  :func:`reading` (raw SQL); its writes (audit events) still go to the primary, in the
  request's transaction.
* **Same tenant, same role.** The replica read runs in a transaction of its own on the replica,
  as the application role, with the request's tenant set in it as on the primary
  (:func:`apps.tenancy.context.tenant_carried`): row-level security applies there too.
* **Read-your-writes.** After a write by an agent credential, the primary's WAL position
  (``pg_current_wal_lsn()``, taken after the request committed) is kept for that credential in
  the ``replica_positions`` cache and answered in ``X-Memory-Position``; a later read that
  echoes it, or whose credential has one kept, uses a replica only once
  ``pg_last_wal_replay_lsn()`` has reached it, else the primary.
* **Failure.** A replica further behind than ``REPLICA_MAX_LAG`` seconds, or that does not
  answer, leaves the rotation for ``REPLICA_RETRY_AFTER`` seconds (per process); the read is
  served by the primary, health says ``degraded``, and the next read after that period tries
  the replica again.
"""

from __future__ import annotations

import functools
import itertools
import logging
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.cache import caches
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections, transaction
from django.http import HttpRequest, HttpResponse

from apps.core.errors import Invalid
from apps.core.metrics import replica_reads
from apps.core.problems import INVALID_FIELDS

from .context import TENANT_SETTING, tenant_carried

logger = logging.getLogger(__name__)

# Sent by the server after a write, echoed by a client on its reads (docs/api.md).
POSITION_HEADER = "X-Memory-Position"
_POSITION_META = "HTTP_X_MEMORY_POSITION"
# A PostgreSQL LSN as PostgreSQL prints it: two hexadecimal halves.
_LSN = re.compile(r"^[0-9A-Fa-f]{1,8}/[0-9A-Fa-f]{1,8}$")
_UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})

# The alias the current handler reads from; None: the primary.
_reading: ContextVar[str | None] = ContextVar("memoryconsole_replica_reading", default=None)
_turn = itertools.count()

# One statement opens a replica read: the tenant and the statement timeout for this
# transaction, whether it is a replica (a "replica" that is a primary serves fresh data), how
# far it has replayed and its lag: zero while it has replayed all it received (an idle primary
# writes nothing to replay), else the age of the last transaction it replayed.
_LAG_SQL = """
       CASE WHEN NOT pg_is_in_recovery()
              OR pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0
            ELSE COALESCE(EXTRACT(EPOCH FROM now() - pg_last_xact_replay_timestamp()), 0)
       END
"""
_BEGIN_SQL = f"""
SELECT set_config(%(setting)s, %(tenant)s, true),
       set_config('statement_timeout', %(timeout)s, true),
       NOT pg_is_in_recovery() OR pg_last_wal_replay_lsn() >= %(needed)s::pg_lsn,{_LAG_SQL}"""
_STATUS_SQL = f"SELECT{_LAG_SQL}"
# Nothing has a position below this: the needed position of a read with none.
_ORIGIN = "0/0"


@dataclass
class _Out:
    until: float
    reason: str


# Per process: which replicas are out of rotation, until when and why.
_out: dict[str, _Out] = {}
_out_lock = threading.Lock()


def configured() -> list[str]:
    return list(getattr(settings, "REPLICA_DATABASES", []) or [])


class ReplicaRouter:
    """Django's router (``DATABASE_ROUTERS``): inside a :func:`replica_read` handler the ORM
    reads the replica it chose; everything else, every write included, uses the primary."""

    def db_for_read(self, model: Any, **hints: Any) -> str:
        return _reading.get() or DEFAULT_DB_ALIAS

    def db_for_write(self, model: Any, **hints: Any) -> str:
        return DEFAULT_DB_ALIAS

    def allow_relation(self, obj1: Any, obj2: Any, **hints: Any) -> bool:
        return True  # one database, copied: an object read on a replica is the primary's row

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool | None:
        return False if db in configured() else None  # a replica replays the primary's schema


def reading() -> Any:
    """The connection the current handler reads from (for raw SQL): the chosen replica inside
    a :func:`replica_read` handler, else the primary."""
    return connections[_reading.get() or DEFAULT_DB_ALIAS]


def mark_out(alias: str, reason: str) -> None:
    """Take ``alias`` out of rotation for ``REPLICA_RETRY_AFTER`` seconds."""
    with _out_lock:
        first = alias not in _out
        _out[alias] = _Out(time.monotonic() + settings.REPLICA_RETRY_AFTER, reason)
    if first:
        logger.warning("replica %s out of rotation: %s", alias, reason)


def _mark_in(alias: str) -> None:
    with _out_lock:
        gone = _out.pop(alias, None)
    if gone is not None:
        logger.warning("replica %s back in rotation", alias)


def _candidates() -> list[str]:
    """Configured replicas in rotation, starting from the next one in turn; one whose
    out-of-rotation period has passed is tried again."""
    aliases = configured()
    if not aliases:
        return []
    now = time.monotonic()
    with _out_lock:
        usable = [a for a in aliases if a not in _out or _out[a].until <= now]
    start = next(_turn) % len(aliases)
    return sorted(usable, key=lambda a: (aliases.index(a) - start) % len(aliases))


def _lost(alias: str) -> None:
    """A replica failed: out of rotation, and its connection closed (a later read
    reconnects)."""
    mark_out(alias, "unreachable")
    with suppress(DatabaseError):  # closing a broken connection
        connections[alias].close()


# --- read-your-writes ---------------------------------------------------------------------


def _credential_key(credential: Any) -> str:
    return f"credential:{credential.pk}"


def _lsn_value(lsn: str) -> tuple[int, int]:
    high, low = lsn.split("/")
    return int(high, 16), int(low, 16)


def echoed_position(request: Any) -> str:
    """The request's ``X-Memory-Position`` (empty without one); refused (400) unless it is a
    position as a write answered it."""
    echoed = str(request.META.get(_POSITION_META, "")).strip()
    if echoed and not _LSN.match(echoed):
        raise Invalid(
            INVALID_FIELDS,
            errors={
                POSITION_HEADER: [
                    "Send back the X-Memory-Position a write answered (e.g. 0/16B3748), or none."
                ]
            },
        )
    return echoed


def needed_position(echoed: str, credential: Any) -> str:
    """The WAL position a replica must have replayed to serve this read: the later of the
    request's ``X-Memory-Position`` and the credential's last write kept in the cache."""
    positions = [p for p in (echoed, _kept_position(credential)) if p]
    return max(positions, key=_lsn_value) if positions else _ORIGIN


def _kept_position(credential: Any) -> str:
    if credential is None:
        return ""
    try:
        return str(caches["replica_positions"].get(_credential_key(credential)) or "")
    except Exception:
        logger.warning("the replica_positions cache is unreachable", exc_info=True)
        return ""


# Set on the responses of ``replica_read`` handlers (searches, listings): requests that
# changed no memory, whatever their method.
READ_ONLY_MARK = "memoryconsole_read_only"


class WritePositionMiddleware:
    """After an API request that may have written (an unsafe method, not a ``replica_read``
    handler such as a search), answer the primary's WAL position in
    ``X-Memory-Position`` and keep it for the credential (read-your-writes). Outside the
    request's transaction (ATOMIC_REQUESTS wraps the view only), so the position is taken
    after the commit: a replica that has replayed it has replayed the write."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if (
            configured()
            and request.method in _UNSAFE_METHODS
            and request.path.startswith("/api/")
            and response.status_code < 500
            and not getattr(response, READ_ONLY_MARK, False)
        ):
            self._position_answered(request, response)
        return response

    def _position_answered(self, request: HttpRequest, response: HttpResponse) -> None:
        primary = connections[DEFAULT_DB_ALIAS]
        if primary.in_atomic_block:
            return  # not committed yet (a test's own transaction): no position to give
        try:
            with primary.cursor() as cursor:
                cursor.execute("SELECT pg_current_wal_lsn()::text")
                row = cursor.fetchone()
        except DatabaseError:
            return  # the answer stands; the next write gives a position again
        position = str(row[0])
        response[POSITION_HEADER] = position
        credential = getattr(getattr(request, "user", None), "credential", None)
        if credential is not None:
            try:
                caches["replica_positions"].set(_credential_key(credential), position)
            except Exception:
                logger.warning("the replica_positions cache is unreachable", exc_info=True)


# --- reads --------------------------------------------------------------------------------


def _opened(alias: str, needed: str) -> bool | None:
    """Open the replica read on ``alias`` (already in its transaction): True when it may
    serve it, False when it has not replayed ``needed`` yet, None when it lags past
    ``REPLICA_MAX_LAG`` (taken out of rotation)."""
    timeout = f"{int(settings.REQUEST_STATEMENT_TIMEOUT * 1000)}ms"
    with connections[alias].cursor() as cursor:
        cursor.execute(
            _BEGIN_SQL,
            {
                "setting": TENANT_SETTING,
                "tenant": tenant_carried(),
                "timeout": timeout,
                "needed": needed,
            },
        )
        _tenant, _timeout, caught_up, lag = cursor.fetchone()
    if float(lag) > settings.REPLICA_MAX_LAG:
        mark_out(alias, f"lag {float(lag):.1f} s")
        return None
    _mark_in(alias)
    return bool(caught_up)


def replica_read(
    when: Callable[[Any], bool] | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Mark a read-only API handler as one a replica may serve (``when(view)``: only then).

    The handler runs reading a replica in rotation that has replayed the credential's last
    write; with none, on the primary, exactly as unmarked. Its writes (audit events) go to the
    primary in the request's transaction, under a savepoint, so a replica that fails during
    the read is taken out of rotation and the handler runs again on the primary, once."""

    def decorate(handler: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(handler)
        def wrapper(view: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
            response = route(view, request, *args, **kwargs)
            # A read (its only writes are audit events) gives no position to wait for: a
            # credential that searches on would otherwise wait for its own searches.
            setattr(response, READ_ONLY_MARK, True)
            return response

        def route(view: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
            echoed = echoed_position(request)
            if not configured() or (when is not None and not when(view)):
                return handler(view, request, *args, **kwargs)
            needed = needed_position(echoed, getattr(request, "auth", None))
            reason = "unavailable"
            for alias in _candidates():
                try:
                    with transaction.atomic(using=alias):
                        opened = _opened(alias, needed)
                        if opened:
                            with transaction.atomic(using=DEFAULT_DB_ALIAS), _reading_from(alias):
                                try:
                                    response = handler(view, request, *args, **kwargs)
                                except DatabaseError:
                                    raise
                                except Exception:
                                    # Answered from the replica all the same (a 404, say).
                                    replica_reads.labels("replica", "").inc()
                                    raise
                            replica_reads.labels("replica", "").inc()
                            return response
                        if opened is False:
                            reason = "behind"
                except DatabaseError:
                    if connections[alias].is_usable():
                        raise  # the read's own error (a timeout, say), not the replica's
                    _lost(alias)
                    reason = "failed"
            replica_reads.labels("primary", reason).inc()
            return handler(view, request, *args, **kwargs)

        return wrapper

    return decorate


@contextmanager
def _reading_from(alias: str) -> Iterator[None]:
    token = _reading.set(alias)
    try:
        yield
    finally:
        _reading.reset(token)


@contextmanager
def replica_scope(alias: str) -> Iterator[None]:
    """Read ``alias`` for the block, as the current tenant, in a transaction of its own there
    (a command checking a replica: ``verify-erasure``)."""
    with transaction.atomic(using=alias):
        with connections[alias].cursor() as cursor:
            cursor.execute("SELECT set_config(%s, %s, true)", [TENANT_SETTING, tenant_carried()])
        with _reading_from(alias):
            yield


def replayed_now(alias: str, *, timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for ``alias`` to replay everything the primary has
    written so far; whether it did."""
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute("SELECT pg_current_wal_lsn()::text")
        target = cursor.fetchone()[0]
    deadline = time.monotonic() + timeout
    with connections[alias].cursor() as cursor:
        while True:
            cursor.execute(
                "SELECT NOT pg_is_in_recovery() OR pg_last_wal_replay_lsn() >= %s::pg_lsn",
                [target],
            )
            if cursor.fetchone()[0]:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.1)


# --- health -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReplicaStatus:
    name: str
    status: str  # "ok", "lagging" or "unreachable"
    lag_seconds: float | None


def replica_statuses() -> list[ReplicaStatus]:
    """Ask each configured replica how far behind it is (health). A replica that answers
    within ``REPLICA_MAX_LAG`` rejoins the rotation at once; one that does not leaves it."""
    statuses = []
    for alias in configured():
        try:
            with connections[alias].cursor() as cursor:
                cursor.execute(_STATUS_SQL)
                (lag,) = cursor.fetchone()
        except DatabaseError:
            _lost(alias)
            statuses.append(ReplicaStatus(alias, "unreachable", None))
            continue
        lag = round(float(lag), 3)
        if lag > settings.REPLICA_MAX_LAG:
            mark_out(alias, f"lag {lag:.1f} s")
            statuses.append(ReplicaStatus(alias, "lagging", lag))
        else:
            _mark_in(alias)
            statuses.append(ReplicaStatus(alias, "ok", lag))
    return statuses
