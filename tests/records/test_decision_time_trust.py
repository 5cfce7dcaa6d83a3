"""Decision-time trust (issue #34): whether a fact still applies. A confirmed value that a
third agent contradicts is in open conflict, and every read an agent decides on says so:
search hits, facts and fact checks; a decision search withholds it."""

from __future__ import annotations

import pytest

from apps.tenancy.models import Tenant
from tests.conftest import make_agent
from tests.records.factories import body

pytestmark = pytest.mark.django_db

SCOPE = {"domain": "commerce", "task_type": "refunds"}


def refund_limit(agent, value, ref):
    return agent.post(
        "/api/v1/records",
        body(
            key="refund.limit",
            subject="policy:refunds",
            value=value,
            content=f"refund limit {value} eur",
            source__ref=ref,
            scope=SCOPE,
            sensitivity="internal",
        ),
    )


@pytest.fixture
def contradicted(tenant):
    """refund.limit = 200 eur written by two agents (so confirmed), then 500 by a third."""
    Tenant.objects.filter(pk=tenant.pk).update(auto_promote_on_second_observation=True)
    first, second, third = (make_agent(tenant, name=f"writer-{n}") for n in range(3))
    written = refund_limit(first, 200, "interaction:1").json()
    observed = refund_limit(second, 200, "interaction:2").json()
    assert observed["trust"] == "confirmed", observed
    contender = refund_limit(third, 500, "interaction:3").json()
    assert contender["outcome"] == "conflict", contender
    detail = first.get(f"/api/v1/records/{written['id']}").json()
    assert detail["conflict"] == contender["conflict"]
    return {"agent": first, "record": written, "conflict": contender["conflict"]}


def test_a_context_hit_in_open_conflict_carries_it(contradicted):
    agent, record = contradicted["agent"], contradicted["record"]
    answer = agent.post("/api/v1/search", {"query": "refund limit", "scope": SCOPE}).json()
    [hit] = [h for h in answer["results"] if h["record"]["id"] == record["id"]]
    assert hit["in_conflict"] is True
    assert hit["conflict"] == contradicted["conflict"]
    assert hit["record"]["conflict"] == contradicted["conflict"]


def test_a_decision_search_withholds_a_memory_in_open_conflict(contradicted):
    agent, record = contradicted["agent"], contradicted["record"]
    answer = agent.post(
        "/api/v1/search", {"query": "refund limit", "scope": SCOPE, "purpose": "decision"}
    ).json()
    assert answer["results"] == []
    assert answer["withheld"] == [
        {
            "record": record["id"],
            "key": "refund.limit",
            "reason": "in_conflict",
            "conflict": contradicted["conflict"],
        }
    ]
    assert answer["abstention"]["reason"] == "in_conflict"


def test_facts_carry_the_open_conflict(contradicted):
    agent, record = contradicted["agent"], contradicted["record"]
    facts = agent.get("/api/v1/facts", {"subject": "policy:refunds"}).json()["facts"]
    [fact] = facts
    assert fact["id"] == record["id"]
    assert fact["in_conflict"] is True
    assert fact["conflict"] == contradicted["conflict"]


def test_a_fact_check_says_a_value_in_open_conflict_is_not_safe_to_act_on(contradicted):
    agent, record = contradicted["agent"], contradicted["record"]
    answer = agent.post(
        "/api/v1/facts/check", {"facts": [{"id": record["id"], "version": record["version"]}]}
    ).json()
    [check] = answer["facts"]
    # Still the current value (a conflict changes nothing until it is resolved) ...
    assert (check["current"], check["stale"]) == (True, False)
    # ... but not one to act on.
    assert check["in_conflict"] is True
    assert check["conflict"] == contradicted["conflict"]
    assert check["trust"] == "confirmed"
    assert check["safe_to_act"] is False
    assert check["unsafe_reasons"] == ["in_conflict"]
    assert answer["unsafe"] == 1
