"""A scope is part of what a fact means (ARCHITECTURE.md principle 5): the design's own
example, through the API. "Short answers" observed in support and "complete answers"
observed in legal review are two facts, neither conflicting with nor corroborating the other,
and retrieval answers each only in its own scope."""

from __future__ import annotations

from typing import Any

import pytest

from apps.records.models import Conflict, Fact, MemoryRecord, PromotionRequest, Scope
from apps.tenancy.context import tenant_scope
from tests.retrieval.conftest import embed_all

from .support import FACTS, write_ok

pytestmark = pytest.mark.django_db

SUPPORT = {"domain": "support", "task_type": "chat", "conditions": {}}
LEGAL = {"domain": "legal", "task_type": "review", "conditions": {}}


def _style(agent: Any, value: str, scope: dict[str, Any], ref: str, **extra: Any) -> Any:
    return write_ok(
        agent,
        subject="user:8812",
        key="answer.style",
        value=value,
        scope=scope,
        source={"kind": "interaction", "ref": ref},
        sensitivity="internal",
        **extra,
    )


def _search(agent: Any, **payload: Any) -> Any:
    response = agent.post("/api/v1/search", payload)
    assert response.status_code == 200, response.content[:600]
    return response.json()["results"]


def test_it_stores_a_support_and_a_legal_preference_as_two_facts(agent, tenant):
    short = _style(agent, "short", SUPPORT, "interaction:1")
    complete = _style(agent, "complete", LEGAL, "interaction:2")

    assert complete["conflict"] is None
    assert complete["supersedes"] is None
    assert complete["version"] == 1
    with tenant_scope(tenant.pk):
        assert Conflict.objects.count() == 0
        assert Fact.objects.count() == 2
        assert Scope.objects.count() == 2
        assert MemoryRecord.objects.filter(is_current=True).count() == 2
    assert short["id"] != complete["id"]


def test_it_does_not_count_the_same_value_in_another_scope_as_corroboration(
    agent, second_agent, tenant
):
    _style(agent, "short", SUPPORT, "interaction:1")
    other = _style(second_agent, "short", LEGAL, "interaction:2")

    assert other["version"] == 1
    with tenant_scope(tenant.pk):
        assert PromotionRequest.objects.count() == 0
        assert Fact.objects.count() == 2


def test_it_keeps_conditions_of_one_domain_apart(agent, second_agent, tenant):
    eu = {"domain": "commerce", "task_type": "checkout", "conditions": {"region": "eu"}}
    us = {"domain": "commerce", "task_type": "checkout", "conditions": {"region": "us"}}
    write_ok(agent, subject="user:1", value="carrier_a", scope=eu)
    us_write = write_ok(agent, subject="user:1", value="carrier_b", scope=us)
    assert us_write["conflict"] is None
    # Within one scope the rules are today's: same value from an independent source is an
    # observation, a different one a conflict.
    again = write_ok(
        second_agent,
        subject="user:1",
        value="carrier_a",
        scope=eu,
        source={"kind": "interaction", "ref": "interaction:other"},
    )
    assert again["outcome"] == "observed"
    clash = write_ok(agent, subject="user:1", value="carrier_c", scope=eu)
    assert clash["conflict"] is not None
    with tenant_scope(tenant.pk):
        assert Conflict.objects.count() == 1
        assert PromotionRequest.objects.count() == 1


def test_it_treats_conditions_of_the_same_meaning_as_one_scope(agent, tenant):
    first = {"domain": "commerce", "conditions": {"tier": 1, "region": "eu"}}
    same = {"domain": "commerce", "conditions": {"region": "eu", "tier": 1.0}}
    write_ok(agent, subject="user:1", value="carrier_a", scope=first)
    clash = write_ok(agent, subject="user:1", value="carrier_b", scope=same)
    assert clash["conflict"] is not None
    with tenant_scope(tenant.pk):
        assert Scope.objects.count() == 1


def test_it_answers_each_preference_in_its_own_scope_only(agent, tenant):
    short = _style(agent, "short", SUPPORT, "interaction:1")
    complete = _style(agent, "complete", LEGAL, "interaction:2")
    embed_all(tenant)

    support_hits = _search(agent, query="answer style", scope=SUPPORT)
    legal_hits = _search(agent, query="answer style", scope=LEGAL)

    assert [hit["record"]["id"] for hit in support_hits] == [short["id"]]
    assert [hit["record"]["id"] for hit in legal_hits] == [complete["id"]]
    assert legal_hits[0]["record"]["scope"]["domain"] == "legal"
    assert legal_hits[0]["type"] == "record"


def test_it_lists_both_facts_with_their_scopes(agent):
    _style(agent, "short", SUPPORT, "interaction:1")
    _style(agent, "complete", LEGAL, "interaction:2")

    response = agent.get(FACTS, {"subject": "user:8812"})
    assert response.status_code == 200
    facts = response.json()["results"]
    assert sorted((f["value"], f["scope"]["domain"]) for f in facts) == [
        ("complete", "legal"),
        ("short", "support"),
    ]
    assert all(f["key"] == "answer.style" for f in facts)

    legal = agent.get(FACTS, {"subject": "user:8812", "domain": "legal"}).json()["results"]
    assert [f["value"] for f in legal] == ["complete"]
    review = agent.get(FACTS, {"subject": "user:8812", "task_type": "chat"}).json()["results"]
    assert [f["value"] for f in review] == ["short"]


def test_it_filters_facts_by_conditions_by_containment(agent):
    scope = {"domain": "commerce", "conditions": {"region": "eu", "tier": 1}}
    write_ok(agent, subject="user:1", value="carrier_a", scope=scope)
    write_ok(
        agent, subject="user:1", value="carrier_b", scope={"domain": "commerce", "conditions": {}}
    )
    hits = agent.get(FACTS, {"subject": "user:1", "conditions": '{"region": "eu"}'}).json()
    assert [f["value"] for f in hits["results"]] == ["carrier_a"]

    bad = agent.get(FACTS, {"subject": "user:1", "conditions": "[1"})
    assert bad.status_code == 400
    assert "conditions" in bad.json()["errors"]


def test_it_refuses_a_decision_search_without_a_domain(agent):
    _style(agent, "short", SUPPORT, "interaction:1")

    response = agent.post("/api/v1/search", {"query": "answer style", "purpose": "decision"})
    assert response.status_code == 400
    assert response["Content-Type"].startswith("application/problem+json")
    assert "scope.domain" in response.json()["errors"]

    scoped = agent.post(
        "/api/v1/search",
        {"query": "answer style", "purpose": "decision", "scope": {"domain": "support"}},
    )
    assert scoped.status_code == 200


def test_it_resolves_a_conflict_of_one_scope_without_touching_another(
    agent, second_agent, review_agent, tenant
):
    short = _style(agent, "short", SUPPORT, "interaction:1")
    _style(agent, "complete", LEGAL, "interaction:2")
    contender = _style(second_agent, "terse", SUPPORT, "interaction:3")
    response = review_agent.post(
        f"/api/v1/conflicts/{contender['conflict']}/resolve",
        {"resolution": "accept_new", "reason": "confirmed by the user"},
    )
    assert response.status_code == 200, response.content[:500]
    facts = agent.get(FACTS, {"subject": "user:8812"}).json()["results"]
    assert sorted(f["value"] for f in facts) == ["complete", "terse"]
    with tenant_scope(tenant.pk):
        assert MemoryRecord.objects.get(pk=short["id"]).status == "superseded"
