"""Helpers shared by the records tests: writing through the API, reading rows as a tenant,
and moving a record's clock without a time-freezing library."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from django.utils import timezone
from django.utils.dateparse import parse_datetime

from apps.audit.models import AuditEvent
from apps.records.models import Fact, MemoryRecord, Observation
from apps.tenancy.context import tenant_scope

from .factories import body

RECORDS = "/api/v1/records"
FACTS = "/api/v1/facts"


def write(agent: Any, **overrides: Any) -> Any:
    """POST a valid body (with ``overrides``, see :func:`factories.body`)."""
    return agent.post(RECORDS, body(**overrides))


def write_ok(agent: Any, status: int = 201, **overrides: Any) -> dict[str, Any]:
    response = write(agent, **overrides)
    assert response.status_code == status, response.content[:800]
    return response.json()


def post_raw(agent: Any, path: str, raw: str | bytes, headers: dict[str, str] | None = None) -> Any:
    """POST a body exactly as given (for JSON the test client would not produce)."""
    return agent.client.post(
        path, raw, content_type="application/json", headers=agent._headers(headers)
    )


def ts(value: str | None) -> Any:
    assert value is not None
    parsed = parse_datetime(value)
    assert parsed is not None
    return parsed


def row_counts(tenant: Any) -> dict[str, int]:
    with tenant_scope(tenant.pk):
        return {
            "records": MemoryRecord.objects.count(),
            "facts": Fact.objects.count(),
            "observations": Observation.objects.count(),
        }


def expire(tenant: Any, record_id: str, ago: timedelta = timedelta(minutes=5)) -> None:
    """Move a record's expiry into the past (the read-time predicate must hide it at once)."""
    with tenant_scope(tenant.pk):
        updated = MemoryRecord.objects.filter(pk=record_id).update(expires_at=timezone.now() - ago)
    assert updated == 1


def audit_events(tenant: Any, action: str | None = None) -> list[AuditEvent]:
    with tenant_scope(tenant.pk):
        queryset = AuditEvent.objects.order_by("seq")
        if action:
            queryset = queryset.filter(action=action)
        return list(queryset)


def audit_row_text(event: AuditEvent) -> str:
    """Every column of an audit row as one string, to search for leaked content."""
    return json.dumps(
        {
            "actor": [event.actor_type, event.actor_id, event.actor_label],
            "action": event.action,
            "object": [event.object_type, event.object_id],
            "digest": event.digest,
            "data": event.data,
        },
        default=str,
    )


def fact_values(agent: Any, subject: str = "user:8812", **params: str) -> dict[str, Any]:
    response = agent.get(FACTS, {"subject": subject, **params})
    assert response.status_code == 200, response.content[:500]
    return {fact["key"]: fact for fact in response.json()["results"]}


def listed_ids(agent: Any, **filters: str) -> set[str]:
    response = agent.get(RECORDS, filters)
    assert response.status_code == 200, response.content[:500]
    return {record["id"] for record in response.json()["results"]}
