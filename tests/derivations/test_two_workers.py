"""Two real Celery workers, as on two machines, share one Redis and one database: every queued
embedding is done exactly once (the drain's ``FOR UPDATE SKIP LOCKED`` claim, not luck)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connections
from django.db.models import Count

from apps.derivations.models import Embedding
from apps.tenancy.context import tenant_scope
from apps.tenancy.tasks import TENANT_HEADER
from apps.work.models import OutboxMessage, OutboxState
from apps.work.outbox import EMBED_WAKEUP, outbox_relay_tenant
from memoryconsole.celery import app
from tests.brokers import redis_url
from tests.records.factories import body

REDIS_URL = redis_url()
BATCH = "/api/v1/records/batch"
# More than two drain batches (256 rows each), so drains on both workers claim at once.
RECORDS = 600
WAKEUPS = 6
# What a drain returns (apps.derivations.tasks._drain), logged by the worker when it ends.
DRAIN_RESULT = re.compile(r"(\d+) done, (\d+) embedded, (\d+) deferred")

pytestmark = [pytest.mark.slow, pytest.mark.redis, pytest.mark.django_db(transaction=True)]


# Deadlines that only tell a hang from slowness: generous, so a machine several times busier
# than this one still passes (each wait ends as soon as its condition holds).
STARTUP_TIMEOUT = 300.0
WORK_TIMEOUT = 300.0


def wait_for(condition: Callable[[], bool], what: str, workers: list[Any], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        for worker in workers:
            assert worker.poll() is None, f"a worker exited while waiting for {what}"
        assert time.monotonic() < deadline, f"no {what} within {timeout}s"
        time.sleep(0.2)


def drains(log: Path) -> list[tuple[int, int, int]]:
    """(rows done, vectors written, rows deferred) of each drain the worker finished."""
    text = log.read_text(errors="replace")
    return [(int(a), int(b), int(c)) for a, b, c in DRAIN_RESULT.findall(text)]


@pytest.fixture
def queue() -> Iterator[str]:
    name = f"test-two-workers-{uuid.uuid4().hex}"
    yield name
    with app.connection_for_write(REDIS_URL) as connection:
        channel: Any = connection.default_channel
        channel.queue_delete(name)


def test_two_workers_on_one_redis_embed_every_source_once(
    agent: Any, tenant: Any, queue: str, tmp_path: Path
) -> None:
    for start in range(0, RECORDS, 300):
        items = [body(subject=f"user:{n}", value=f"carrier {n}") for n in range(start, start + 300)]
        response = agent.post(BATCH, {"items": items})
        assert response.status_code == 200, response.content[:800]
        assert response.json()["succeeded"] == 300
    with tenant_scope(tenant.pk):
        assert OutboxMessage.objects.count() == RECORDS
        assert not Embedding.objects.exists()

    env = {
        **os.environ,
        "MEMORYCONSOLE_DATABASE_NAME": connections["default"].settings_dict["NAME"],
        "DJANGO_SETTINGS_MODULE": "memoryconsole.settings",
        "CELERY_BROKER_URL": REDIS_URL,
        "MEMORYCONSOLE_LOG_FORMAT": "plain",
        "PYTHONUNBUFFERED": "1",
    }
    logs = [tmp_path / f"worker-{n}.log" for n in (1, 2)]
    workers = []
    try:
        for n, log in enumerate(logs, start=1):
            with log.open("wb") as out:
                workers.append(
                    subprocess.Popen(
                        [
                            sys.executable,
                            str(Path(__file__).with_name("queue_worker.py")),
                            queue,
                            f"two-workers-{n}",
                        ],
                        env=env,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                )
        # Both consuming before any work is sent, so either may take it.
        wait_for(
            lambda: all(" ready." in log.read_text(errors="replace") for log in logs),
            "two ready workers",
            workers,
            timeout=STARTUP_TIMEOUT,
        )
        with app.connection_for_write(REDIS_URL) as connection:

            def wake(tenant_id: Any) -> None:
                app.send_task(
                    EMBED_WAKEUP,
                    headers={TENANT_HEADER: str(tenant_id)},
                    queue=queue,
                    connection=connection,
                )

            assert outbox_relay_tenant(tenant.pk, wake=wake) > 0  # publishes a first part
            # More wake-ups, as a relay pass and the writers' commits send them: drains on
            # every thread of both workers race for the same rows.
            for _ in range(WAKEUPS - 1):
                wake(tenant.pk)

        def finished() -> bool:
            with tenant_scope(tenant.pk):
                return not OutboxMessage.objects.exclude(state=OutboxState.DONE).exists()

        wait_for(finished, "finished outbox", workers, timeout=WORK_TIMEOUT)
        # A drain's result is logged just after its last commit.
        wait_for(
            lambda: sum(done for log in logs for done, _, _ in drains(log)) >= RECORDS,
            "logged drains",
            workers,
            timeout=WORK_TIMEOUT,
        )
    finally:
        for worker in workers:
            if worker.poll() is None:
                os.killpg(worker.pid, signal.SIGTERM)  # a warm shutdown: running tasks end
        for worker in workers:
            try:
                worker.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, signal.SIGKILL)
                worker.wait(10)

    with tenant_scope(tenant.pk):
        per_record = Embedding.objects.values("record_id").annotate(n=Count("id"))
        assert len(per_record) == RECORDS
        assert {row["n"] for row in per_record} == {1}
        rows = OutboxMessage.objects.values_list("state", "attempts")
        assert set(rows) == {(OutboxState.DONE, 0)}  # each finished by its first claim
    # The work the drains did, summed over both workers: every row finished once and every
    # vector computed and written once (a second run of a source would count again).
    results = [result for log in logs for result in drains(log)]
    assert sum(done for done, _, _ in results) == RECORDS
    assert sum(embedded for _, embedded, _ in results) == RECORDS
    assert sum(deferred for _, _, deferred in results) == 0
