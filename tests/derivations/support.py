"""Helpers for the derivations tests: write through the API, run the outbox synchronously."""

from __future__ import annotations

from typing import Any

from apps.derivations import tasks as _tasks  # noqa: F401 - registers the tasks
from apps.governance import tasks as _governance_tasks  # noqa: F401 - and erasure jobs
from apps.tenancy.tasks import TENANT_HEADER
from apps.work.models import OutboxMessage
from apps.work.outbox import EMBED_WAKEUP, outbox_relay
from memoryconsole.celery import app
from tests.records.factories import body

RECORDS = "/api/v1/records"
SUMMARIES = "/api/v1/summaries"
SEARCH = "/api/v1/search"


def run_eagerly(message: OutboxMessage) -> None:
    """Publish by running the task here, as the worker would: ids only, tenant in a header."""
    task = app.tasks[message.task_name]
    task.apply(
        kwargs={**message.payload, "outbox_id": str(message.pk)},
        headers={TENANT_HEADER: str(message.tenant_id)},
    )


def wake_eagerly(tenant_id: Any) -> None:
    """Wake a tenant's embedding drain by running it here, as the worker would."""
    app.tasks[EMBED_WAKEUP].apply(headers={TENANT_HEADER: str(tenant_id)})


def drain() -> int:
    """Relay every tenant's pending outbox rows and run their tasks (embeddings: the drain)."""
    return outbox_relay(limit=10_000, publish=run_eagerly, wake=wake_eagerly)


def write(agent: Any, status: int = 201, **overrides: Any) -> dict[str, Any]:
    response = agent.post(RECORDS, body(**overrides))
    assert response.status_code == status, response.content[:800]
    return response.json()


def summarise(agent: Any, record_ids: list[str], text: str = "a summary", **extra: Any) -> Any:
    payload = {
        "text": text,
        "sources": [{"type": "record", "id": rid} for rid in record_ids],
        "reason": "context for checkout",
        **extra,
    }
    return agent.post(SUMMARIES, payload)
