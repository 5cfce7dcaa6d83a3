"""Helpers of the evaluation's API and console tests: confirmed memories and decisions."""

from __future__ import annotations

from typing import Any

from apps.core.actors import Actor
from apps.records.models import MemoryRecord
from apps.review.services import promotion_approve, promotion_request_create
from apps.tenancy.context import tenant_scope
from tests.conftest import make_agent
from tests.records.factories import body

REVIEWER = Actor.system("a reviewer")


def writer_agent(tenant: Any) -> Any:
    """An agent that writes, decides, deletes and audits."""
    return make_agent(tenant, "read,write,search,delete,erase,audit", name="writer")


def remember(agent: Any, tenant: Any, key: str, value: str = "carrier_a", **extra: Any) -> str:
    """A confirmed record of ``user:1`` in commerce, ready to be returned by a decision."""
    response = agent.post(
        "/api/v1/records",
        body(
            key=key,
            subject="user:1",
            value=value,
            content=f"the preference {key.split('.')[0]} is {value}",
            **extra,
        ),
    )
    assert response.status_code == 201, response.content
    record_id = response.json()["id"]
    with tenant_scope(tenant.pk):
        record = MemoryRecord.objects.get(pk=record_id)
        request = promotion_request_create(record=record, actor=REVIEWER, evidence=None, reason="r")
        promotion_approve(request=request, actor=REVIEWER, reason="checked")
    return record_id


def decide(agent: Any, query: str) -> list[str]:
    response = agent.post(
        "/api/v1/search",
        {
            "query": query,
            "purpose": "decision",
            # The scope the memories were written in (tests.records.factories.body).
            "scope": body()["scope"],
            "subject": "user:1",
        },
    )
    assert response.status_code == 200, response.content
    return [hit["record"]["id"] for hit in response.json()["results"]]
