"""Helpers shared by the state tests."""

from __future__ import annotations

from typing import Any

from apps.audit.models import AuditEvent
from apps.tenancy.context import tenant_scope

RUNS = "/api/v1/runs"
OBLIGATIONS = "/api/v1/obligations"


def ok(response: Any, status: int = 200) -> Any:
    assert response.status_code == status, response.content[:800]
    return response.json()


def open_run(
    agent: Any, task_id: str = "task-1", owner: str = "service:checkout"
) -> dict[str, Any]:
    return ok(agent.post(RUNS, {"task_id": task_id, "owner": owner}), 201)


def create_obligation(agent: Any, key: str = "task-1:1:charge", **fields: Any) -> dict[str, Any]:
    body = {"task_id": "task-1", "kind": "charge", "key": key, "payload": {"amount": 42}}
    body.update(fields)
    response = agent.post(OBLIGATIONS, body)
    assert response.status_code in (200, 201), response.content[:800]
    return response.json()


def audit_events(tenant: Any, action: str | None = None) -> list[AuditEvent]:
    with tenant_scope(tenant.pk):
        events = AuditEvent.objects.order_by("seq")
        if action:
            events = events.filter(action=action)
        return list(events)
