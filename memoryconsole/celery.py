"""The Celery app. Tasks run in their tenant's context, carried in a message header.

``TenantTask`` copies the current tenant into the ``memoryconsole_tenant`` header when a task
is sent and, in the worker, runs the task body in one transaction with that tenant active. A
task sent with no tenant runs with none, and so sees no tenant rows (fail-closed).

``delay_on_commit`` / ``apply_async_on_commit`` capture the tenant when they are *called*, not
when the transaction commits: by commit time the ``tenant_scope`` that wanted the task has
usually been left, and the task would otherwise be sent without a tenant.

``tests/test_celery_context.py`` proves both against a real worker.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable, Iterable
from typing import Any

from celery import Celery, signals
from celery.contrib.django.task import DjangoTask

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryconsole.settings")

TENANT_HEADER = "memoryconsole_tenant"

# The health endpoint must answer quickly even when the broker's host drops packets.
BROKER_CHECK_DEADLINE = 1.0


def _with_tenant_header(options: dict[str, Any], *, pin: bool = False) -> dict[str, Any]:
    """``options`` with the current tenant in the headers (an explicit header wins).

    The tenant counts only inside a transaction: that is where ``activate_tenant`` makes it
    current, and a value still set after the transaction ended is stale, never to be sent.
    ``pin`` records "no tenant" too (an empty header), so a later send cannot pick up
    whatever tenant happens to be current then.
    """
    from django.db import connection

    from apps.tenancy.context import current_tenant_id

    tenant_id = current_tenant_id() if connection.in_atomic_block else None
    if tenant_id is None and not pin:
        return options
    headers = dict(options.pop("headers", None) or {})
    headers.setdefault(TENANT_HEADER, str(tenant_id) if tenant_id else "")
    return {**options, "headers": headers}


class TenantTask(DjangoTask):  # type: ignore[type-arg]
    """Base task: carries the sender's tenant and restores it around the task body."""

    def apply_async(  # type: ignore[override]
        self, args: Any = None, kwargs: Any = None, **options: Any
    ) -> Any:
        return super().apply_async(args, kwargs, **_with_tenant_header(options))

    # The stubs say these return an AsyncResult; Django's on_commit returns nothing.
    def apply_async_on_commit(self, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        """``apply_async`` after the transaction commits, for the tenant current *now*."""
        from django.db import transaction

        call = functools.partial(self.apply_async, *args, **_with_tenant_header(kwargs, pin=True))
        transaction.on_commit(call)

    def delay_on_commit(self, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        """``delay`` after the transaction commits, for the tenant current *now*."""
        self.apply_async_on_commit(args, kwargs)

    def for_each_tenant(self) -> int:
        """Send this task once per tenant, each carrying its tenant (after the fan-out's
        commit); returns how many were sent. The periodic per-tenant sweeps start here."""
        from apps.tenancy.context import tenant_scope
        from apps.tenancy.models import Tenant

        count = 0
        for tenant_id in Tenant.objects.values_list("pk", flat=True):
            with tenant_scope(tenant_id):
                self.delay_on_commit()
            count += 1
        return count

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from apps.tenancy.context import tenant_scope

        tenant_id = self._tenant_from_request()
        if tenant_id is None:
            return super().__call__(*args, **kwargs)
        with tenant_scope(tenant_id):
            return super().__call__(*args, **kwargs)

    def _tenant_from_request(self) -> str | None:
        request = self.request
        if request is None:
            return None
        # Message protocol 2 exposes custom headers as request attributes; keep the
        # ``headers`` mapping as a fallback (eager calls, older protocol).
        tenant_id = request.get(TENANT_HEADER)
        if tenant_id is None and request.headers:
            tenant_id = request.headers.get(TENANT_HEADER)
        return str(tenant_id) if tenant_id else None


app = Celery("memoryconsole", task_cls=TenantTask)
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


def broker_messages_mentioning(needles: Iterable[str]) -> list[str]:
    """The ids of the SQL broker's stored messages whose body names any of ``needles``.

    kombu stores each message as a JSON envelope with its body base64-encoded, so a body is
    decoded before it is searched. Other transports keep no inspectable store: nothing to
    report. After :func:`broker_delivered_purge` the table holds undelivered messages only.
    """
    import base64
    import json

    wanted = [needle for needle in needles if needle]
    url = str(app.conf.broker_url)
    if not wanted or broker_transport(url) not in {"sqla", "sqlalchemy"}:
        return []
    found: list[str] = []
    with app.connection_for_write(url) as conn:
        channel: Any = conn.channel()
        try:
            message = channel.message_cls
            for pk, payload in channel.session.query(message.id, message.payload):
                text = str(payload)
                try:
                    envelope = json.loads(text)
                    body = envelope.get("body", "")
                    if envelope.get("properties", {}).get("body_encoding") == "base64":
                        body = base64.b64decode(body).decode("utf-8", "replace")
                    text = f"{text}\n{body}"
                except (ValueError, AttributeError, TypeError):
                    text = str(payload)  # not kombu's envelope: searched as stored
                if any(needle in text for needle in wanted):
                    found.append(str(pk))
        finally:
            channel.close()
    return found
