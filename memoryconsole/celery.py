"""The Celery app: configured from the settings, with every task's base ``TenantTask``
(apps/tenancy/tasks.py: a task runs in its sender's tenant, carried in a message header), and
the broker checks the health endpoint and ``up`` use.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

from celery import Celery, signals

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryconsole.settings")

# The health endpoint must answer quickly even when the broker's host drops packets.
BROKER_CHECK_DEADLINE = 1.0


# By name: the base task lives with the tenant context it carries (apps.tenancy.tasks), and is
# imported when the first task is defined, not when settings load this module.
app = Celery("memoryconsole", task_cls="apps.tenancy.tasks:TenantTask")
# The app of every thread: tasks are declared with ``shared_task`` and messages sent through
# ``celery.current_app``, which in a thread other than this one is the default app.
app.set_default()
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@signals.import_modules.connect
def _instance_setup(**kwargs: Any) -> None:
    """The worker and beat are entry points: they prepare the instance (the embedded
    PostgreSQL, which is also the default broker) when they start, before either touches the
    database. Celery sends this when one of its own commands (worker, beat, shell) loads the
    task modules, never in the web server or a management command."""
    from memoryconsole import instance

    instance.setup()


@signals.setup_logging.connect
def _logging_setup(**kwargs: Any) -> None:
    """The worker and beat log through the settings' ``LOGGING``, as the web server does: one
    format (``MEMORYCONSOLE_LOG_FORMAT``) for every process, and its filters (the idle outbox
    relay's lines) on Celery's own loggers. A receiver here replaces Celery's own setup,
    whose root handler would otherwise write its format of its own; ``LOG_LEVEL`` sets the
    level."""
    from logging.config import dictConfig

    from django.conf import settings

    dictConfig(settings.LOGGING)


def broker_transport(url: str | None = None) -> str:
    """The transport name of ``url`` (default: the configured broker): ``sqla``, ``redis``..."""
    url = url or str(app.conf.broker_url)
    return url.split("://", 1)[0].split("+", 1)[0]


def broker_status() -> str:
    """``ok (<transport>)`` when the broker answers now, else ``unreachable (<transport>)``.

    A real round trip every time (nothing cached): ``SELECT 1`` on the SQL transport's
    database, ``PING`` on Redis, a connection for any other transport. Answers within
    about ``BROKER_CHECK_DEADLINE`` seconds: a probe still waiting then counts as unreachable
    (it finishes on its own in the background, bounded by its connect timeout).
    """
    url = str(app.conf.broker_url)
    transport = broker_transport(url)
    outcome: list[bool] = []

    def probe() -> None:
        try:
            _probe_broker(url)
        except Exception:
            outcome.append(False)
        else:
            outcome.append(True)

    thread = threading.Thread(target=probe, name="broker-status", daemon=True)
    thread.start()
    thread.join(BROKER_CHECK_DEADLINE)
    if outcome == [True]:
        return f"ok ({transport})"
    return f"unreachable ({transport})"


def _probe_broker(url: str) -> None:
    """Raise unless the broker at ``url`` answers a trivial request."""
    scheme = url.split("://", 1)[0]
    if scheme.startswith(("sqla+", "sqlalchemy+")):
        from sqlalchemy import create_engine, text
        from sqlalchemy.pool import NullPool

        # NullPool: a fresh connection per check, closed at once, so the check proves the
        # server answers now and leaves nothing open.
        engine = create_engine(
            url.split("+", 1)[1], poolclass=NullPool, connect_args={"connect_timeout": 2}
        )
        try:
            with engine.connect() as conn:
                conn.execute(text("SELECT 1"))
        finally:
            engine.dispose()
    elif scheme in {"redis", "rediss"}:
        import redis

        client = redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1)
        try:
            client.ping()
        finally:
            client.close()
    else:
        with app.connection_for_write(url) as conn:
            conn.ensure_connection(max_retries=1, timeout=1)


def broker_prepare() -> None:
    """Make the broker ready for several processes at once (raises if it is unreachable).

    kombu's SQL transport creates its two tables on first use; a worker, beat and web
    processes starting together would race to create them, so ``up`` calls this first.
    Other transports need nothing beyond a successful connection.
    """
    url = str(app.conf.broker_url)
    _probe_broker(url)
    if broker_transport(url) not in {"sqla", "sqlalchemy"}:
        return
    from kombu.transport.sqlalchemy import Channel

    with app.connection_for_write(url) as conn:
        channel: Any = conn.channel()
        try:
            channel.session  # noqa: B018 - opening the session creates the tables
        finally:
            channel.close()
    # Channel keeps its engines in a class-level cache; close ours so this process holds no
    # idle broker connection for the rest of its life.
    engines: dict[str, tuple[Any, Callable[..., Any]]] = Channel._engines
    for engine, _ in engines.values():
        engine.dispose()
    engines.clear()


def broker_delivered_purge() -> int:
    """Delete the messages kombu's SQL transport has delivered; returns how many.

    The transport marks a message invisible when a worker fetches it and never deletes it,
    so its table grows by every task ever run. A delivered message is never delivered again
    (redelivery is the outbox relay's work), so removing it loses nothing. Other transports
    delete on acknowledgement: nothing to do.
    """
    url = str(app.conf.broker_url)
    if broker_transport(url) not in {"sqla", "sqlalchemy"}:
        return 0
    with app.connection_for_write(url) as conn:
        channel: Any = conn.channel()
        try:
            message = channel.message_cls
            session = channel.session
            deleted = int(
                session.query(message)
                .filter(message.visible.is_(False))
                .delete(synchronize_session=False)
            )
            session.commit()
        finally:
            channel.close()
    return deleted
