"""A worker killed mid-batch (SIGKILL, for real) leaves no vector; the re-run leaves one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.db import connections

from apps.derivations.models import Embedding
from apps.tenancy.context import tenant_scope
from apps.tenancy.tasks import TENANT_HEADER
from apps.work.models import OutboxMessage, OutboxState
from apps.work.outbox import EMBED_WAKEUP, outbox_relay_tenant
from memoryconsole.celery import app
from tests.brokers import redis_url
from tests.processes import wait_ready

from .support import run_eagerly, write

REDIS_URL = redis_url()

pytestmark = [pytest.mark.slow, pytest.mark.redis, pytest.mark.django_db(transaction=True)]


def test_a_killed_worker_leaves_no_duplicate_and_the_rerun_embeds_once(agent, tenant, tmp_path):
    record = write(agent)
    queue = f"test-worker-killed-{uuid.uuid4().hex}"
    marker = tmp_path / "mid-task"
    env = {
        **os.environ,
        "MEMORYCONSOLE_DATABASE_NAME": connections["default"].settings_dict["NAME"],
        "DJANGO_SETTINGS_MODULE": "memoryconsole.settings",
    }
    worker = subprocess.Popen(
        [
            sys.executable,
            str(Path(__file__).with_name("slow_worker.py")),
            queue,
            REDIS_URL,
            str(marker),
        ],
        env=env,
        start_new_session=True,
    )
    try:
        with app.connection_for_write(REDIS_URL) as connection:

            def wake(tenant_id: Any) -> None:
                app.send_task(
                    EMBED_WAKEUP,
                    headers={TENANT_HEADER: str(tenant_id)},
                    queue=queue,
                    connection=connection,
                )

            assert outbox_relay_tenant(tenant.pk, wake=wake) == 1
        wait_ready(marker.exists, what="the worker reaching the middle of the task", process=worker)
        os.killpg(worker.pid, signal.SIGKILL)  # really kill it, mid-task
        worker.wait(10)
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait(10)
    with tenant_scope(tenant.pk):
        assert not Embedding.objects.filter(record_id=record["id"]).exists()  # rolled back
        [row] = OutboxMessage.objects.all()
        assert row.state == OutboxState.PUBLISHED  # not done: the relay will wake it again
        assert row.attempts == 0  # the lease ended with the worker: nothing counted
    run_eagerly(row)  # the re-run (a redelivery, or the relay waking the tenant again)
    run_eagerly(row)  # and a duplicate delivery changes nothing
    with tenant_scope(tenant.pk):
        assert Embedding.objects.filter(record_id=record["id"]).count() == 1
        assert OutboxMessage.objects.get().state == OutboxState.DONE
