"""The tenant travels with a task to a real worker, and a task without one sees nothing.

The worker runs in this process (a thread, ``celery.contrib.testing.worker.start_worker``) so
it uses the test database, as the application role, under row-level security. It consumes
from Redis database 15 on a queue unique to this run, so concurrent runs and any ``up`` on
this machine cannot take its messages.
"""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from celery.contrib.testing.worker import start_worker
from celery.signals import task_postrun
from django.db import connections, transaction
from kombu import Connection

from apps.tenancy.context import activate_tenant, deactivate_tenant, tenant_scope
from apps.tenancy.models import Tenant
from apps.tenancy.tasks import TENANT_HEADER
from memoryconsole.celery import app, broker_status, broker_transport
from memoryconsole.tasks import tenant_probe
from tests.brokers import redis_url

REDIS_URL = redis_url()

pytestmark = pytest.mark.slow
# The worker thread must see what the test wrote: real commits, not a test transaction.
committed = pytest.mark.django_db(transaction=True)


class Worker:
    """Sends probes to the in-process worker and waits for what each one returned."""

    def __init__(self, connection: Connection, queue: str) -> None:
        self.connection = connection
        self.queue = queue
        self.results: dict[str, Any] = {}
        self.finished = threading.Condition()

    def record(self, task_id: str, retval: Any) -> None:
        with self.finished:
            self.results[task_id] = retval
            self.finished.notify_all()

    def send(self, **options: Any) -> str:
        result = tenant_probe.apply_async(queue=self.queue, connection=self.connection, **options)
        return str(result.id)

    def wait(self, task_id: str, timeout: float = 15.0) -> Any:
        with self.finished:
            done = self.finished.wait_for(lambda: task_id in self.results, timeout=timeout)
        assert done, f"the worker did not run task {task_id} within {timeout}s"
        return self.results[task_id]

    def run(self, **options: Any) -> Any:
        return self.wait(self.send(**options))


@pytest.fixture(scope="module")
def running_worker() -> Iterator[Worker]:
    """One worker for the module (starting one takes a second or two)."""
    queue = f"test-tenant-context-{uuid.uuid4().hex}"
    with pytest.MonkeyPatch.context() as monkeypatch, Connection(REDIS_URL) as connection:
        # The worker reads (and would write events) through Redis, not the configured broker.
        monkeypatch.setattr(app.conf, "broker_read_url", REDIS_URL)
        monkeypatch.setattr(app.conf, "broker_write_url", REDIS_URL)
        monkeypatch.setenv("TEST_BROKER", REDIS_URL)
        runner = Worker(connection, queue)

        def on_postrun(task_id: str, retval: Any = None, **kwargs: Any) -> None:
            # Runs in the worker thread: close its database connection, or the test
            # database could not be dropped at the end of the session.
            connections.close_all()
            runner.record(task_id, retval)

        task_postrun.connect(on_postrun, weak=False)
        try:
            with start_worker(
                app,
                pool="solo",
                perform_ping_check=False,
                queues=[queue],
                loglevel="WARNING",
                shutdown_timeout=15,
            ):
                yield runner
        finally:
            task_postrun.disconnect(on_postrun)
            connection.default_channel.queue_delete(queue)


@pytest.fixture
def worker(running_worker: Worker) -> Worker:
    running_worker.results.clear()
    return running_worker


@pytest.fixture
def populated(
    tenant: Tenant,
    other_tenant: Tenant,
    owner: Any,
    reviewer: Any,
    member: Any,
    outsider: Any,
) -> tuple[Tenant, Tenant]:
    """``tenant`` with three memberships, ``other_tenant`` with one."""
    return tenant, other_tenant


@pytest.mark.redis
@committed
def test_it_runs_the_task_as_the_senders_tenant(
    worker: Worker, populated: tuple[Tenant, Tenant]
) -> None:
    acme, globex = populated
    with tenant_scope(acme.pk):
        acme_task = worker.send()
    with tenant_scope(globex.pk):
        globex_task = worker.send()

    assert worker.wait(acme_task) == {
        "tenant": str(acme.pk),
        "database_tenant": str(acme.pk),
        "memberships": 3,
    }
    assert worker.wait(globex_task) == {
        "tenant": str(globex.pk),
        "database_tenant": str(globex.pk),
        "memberships": 1,
    }


@pytest.mark.redis
@committed
def test_it_runs_a_task_sent_without_tenant_with_none(
    worker: Worker, populated: tuple[Tenant, Tenant]
) -> None:
    assert worker.run() == {"tenant": None, "database_tenant": None, "memberships": 0}


@pytest.mark.redis
@committed
def test_it_does_not_send_a_tenant_left_over_from_an_ended_transaction(
    worker: Worker, populated: tuple[Tenant, Tenant]
) -> None:
    acme, _ = populated
    try:
        with transaction.atomic():
            activate_tenant(acme.pk)
        # The transaction (and the database setting) ended; only the Python value remains.
        assert worker.run() == {"tenant": None, "database_tenant": None, "memberships": 0}
    finally:
        deactivate_tenant()


@pytest.mark.redis
@committed
def test_it_keeps_an_explicit_tenant_header(
    worker: Worker, populated: tuple[Tenant, Tenant]
) -> None:
    acme, globex = populated
    with tenant_scope(acme.pk):
        result = worker.run(headers={TENANT_HEADER: str(globex.pk)})
    assert result["tenant"] == str(globex.pk)
    assert result["memberships"] == 1


@pytest.mark.redis
@committed
def test_it_sends_on_commit_for_the_tenant_current_when_asked(
    worker: Worker, populated: tuple[Tenant, Tenant]
) -> None:
    acme, _ = populated
    # By the time the outer transaction commits, the tenant scope has been left: the
    # tenant must have been captured when the task was asked for.
    with transaction.atomic():
        with tenant_scope(acme.pk):
            tenant_probe.apply_async_on_commit(queue=worker.queue, connection=worker.connection)
        assert worker.results == {}
    with worker.finished:
        worker.finished.wait_for(lambda: len(worker.results) == 1, timeout=15)
    [result] = worker.results.values()
    assert result == {"tenant": str(acme.pk), "database_tenant": str(acme.pk), "memberships": 3}


@pytest.mark.redis
@committed
def test_it_sends_on_commit_without_tenant_when_none_was_current(
    worker: Worker, populated: tuple[Tenant, Tenant]
) -> None:
    acme, _ = populated
    try:
        with transaction.atomic():
            tenant_probe.apply_async_on_commit(queue=worker.queue, connection=worker.connection)
            # A tenant activated later in the transaction is still current at commit: it
            # must not be lent to a task asked for before it.
            activate_tenant(acme.pk)
    finally:
        deactivate_tenant()
    with worker.finished:
        worker.finished.wait_for(lambda: len(worker.results) == 1, timeout=15)
    [result] = worker.results.values()
    assert result["memberships"] == 0


# --- broker_status: a real round trip, quickly ---------------------------------------------


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.django_db
def test_it_reports_the_configured_sql_broker_ok() -> None:
    if broker_transport() != "sqla":
        pytest.skip("CELERY_BROKER_URL points elsewhere")
    assert broker_status() == "ok (sqla)"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        pytest.param("{redis}", "ok (redis)", marks=pytest.mark.redis),
        ("redis://127.0.0.1:{port}/0", "unreachable (redis)"),
        ("sqla+postgresql+psycopg://nobody@127.0.0.1:{port}/nothing", "unreachable (sqla)"),
    ],
)
def test_it_checks_the_broker_for_real_and_quickly(
    monkeypatch: pytest.MonkeyPatch, url: str, expected: str
) -> None:
    monkeypatch.setattr(app.conf, "broker_url", url.format(port=_closed_port(), redis=REDIS_URL))
    started = time.monotonic()
    assert broker_status() == expected
    assert time.monotonic() - started < 3


def test_it_gives_up_on_a_broker_that_never_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    """A loopback port that accepts the TCP connection but never speaks: the health check
    must answer within its deadline instead of hanging."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # never accepted: the handshake waits forever
        port = silent.getsockname()[1]
        monkeypatch.setattr(
            app.conf, "broker_url", f"sqla+postgresql+psycopg://nobody@127.0.0.1:{port}/nothing"
        )
        started = time.monotonic()
        assert broker_status() == "unreachable (sqla)"
        assert time.monotonic() - started < 3
