"""Reads of memory leave an audit trace as the tenant's ``audit_reads`` policy says: by
default only those that return a restricted memory; ``all``: every fact read, fact check and
context search; ``off``: none. A decision search is audited whatever the policy. The event
names who read, the filters and the ids returned, never content."""

from __future__ import annotations

import json

import pytest

from apps.audit.models import AuditEvent
from apps.tenancy.context import tenant_scope
from apps.tenancy.models import Tenant
from tests.records.factories import body

pytestmark = pytest.mark.django_db

SECRET = "vault code 4471"


def read_events(tenant):
    with tenant_scope(tenant.pk):
        return list(
            AuditEvent.objects.filter(
                action__in=["facts.read", "facts.check", "search.context"]
            ).order_by("seq")
        )


def write(agent, **overrides):
    response = agent.post("/api/v1/records", body(**overrides))
    assert response.status_code == 201, response.json()
    return response.json()


def policy(tenant, value):
    Tenant.objects.filter(pk=tenant.pk).update(audit_reads=value)


def test_by_default_a_read_returning_a_restricted_memory_is_audited(agent, tenant):
    assert Tenant.objects.get(pk=tenant.pk).audit_reads == "restricted"
    personal = write(agent, subject="user:1", value="carrier alpha")
    restricted = write(
        agent, subject="user:2", key="vault.code", value=SECRET, sensitivity="restricted"
    )
    agent.get("/api/v1/facts", {"subject": "user:1"})
    assert read_events(tenant) == []
    agent.get("/api/v1/facts", {"subject": "user:2"})
    agent.post("/api/v1/facts/check", {"facts": [{"id": personal["id"]}]})
    agent.post("/api/v1/facts/check", {"facts": [{"id": restricted["id"]}]})
    read, check = read_events(tenant)
    assert (read.action, read.actor_id) == ("facts.read", str(agent.credential.pk))
    assert read.data["subject"] == "user:2"
    assert read.data["returned"] == [restricted["id"]]
    assert (check.action, check.data["found"]) == ("facts.check", [restricted["id"]])
    assert SECRET not in json.dumps([read.data, check.data])


def test_all_audits_every_context_search_without_its_text(agent, tenant):
    policy(tenant, "all")
    record = write(agent, subject="user:1", value="carrier alpha")
    answer = agent.post(
        "/api/v1/search", {"query": "carrier alpha", "subject": "user:1", "top_k": 5}
    ).json()
    assert [hit["record"]["id"] for hit in answer["results"]] == [record["id"]]
    [event] = read_events(tenant)
    assert event.action == "search.context"
    assert event.data["returned"] == [record["id"]]
    assert event.data["filters"] == {"scope_match": "contained", "subject": "user:1", "top_k": 5}
    assert "carrier" not in json.dumps(event.data)


def test_off_audits_no_read(agent, tenant):
    policy(tenant, "off")
    record = write(agent, subject="user:2", value=SECRET, sensitivity="restricted")
    agent.get("/api/v1/facts", {"subject": "user:2"})
    agent.post("/api/v1/facts/check", {"facts": [{"id": record["id"]}]})
    agent.post("/api/v1/search", {"query": "vault"})
    assert read_events(tenant) == []
