"""Who may confirm what: a credential never confirms its own value, and only a person acting
in the console writes a ``user_action`` version (API.md, "Review")."""

from __future__ import annotations

import pytest

from apps.records.models import Conflict, MemoryRecord
from apps.tenancy.context import tenant_scope
from tests.api.support import assert_problem
from tests.conftest import make_agent
from tests.records.support import RECORDS, audit_events, fact_values, write_ok

pytestmark = pytest.mark.django_db

LIMIT = {"key": "order.limit", "subject": "user:8812", "scope": {"domain": "commerce"}}


def _limit(agent, value, ref):
    return write_ok(agent, value=value, source__ref=ref, content=f"order limit {value}", **LIMIT)


def _resolve(reviewer, conflict_id, resolution="corrected", **extra):
    payload = {"resolution": resolution, "reason": "checked the order book", **extra}
    return reviewer.post(f"/api/v1/conflicts/{conflict_id}/resolve", payload)


def _decision_hits(agent):
    response = agent.post(
        "/api/v1/search",
        {"query": "order limit", "purpose": "decision", "scope": {"domain": "commerce"}},
    )
    assert response.status_code == 200, response.content[:500]
    return [hit["record"]["id"] for hit in response.json()["results"]]


def test_it_never_lets_an_agent_confirm_its_own_value(tenant):
    writer = make_agent(tenant, "read,write,search,review", name="self-confirmer")
    _limit(writer, 50, "interaction:1")
    contender = _limit(writer, 5000, "interaction:2")
    conflict_id = contender["conflict"]
    assert conflict_id

    for resolution in ("corrected", "accept_new", "keep_current"):
        refused = assert_problem(
            _resolve(
                writer, conflict_id, resolution, value=99999 if resolution == "corrected" else None
            ),
            403,
        )
        assert "wrote" in refused["detail"]
    with tenant_scope(tenant.pk):
        assert Conflict.objects.get(pk=conflict_id).state == "open"
        assert MemoryRecord.objects.filter(key="order.limit").count() == 2

    other = make_agent(tenant, "read,search,review", name="other-reviewer")
    resolved = _resolve(other, conflict_id, value=99999)
    assert resolved.status_code == 200, resolved.content
    corrected = writer.get(f"{RECORDS}/{resolved.json()['resolved_record']}").json()
    assert corrected["value"] == 99999
    assert corrected["trust"] == "provisional"
    assert corrected["source"]["kind"] == "derived"
    assert corrected["source"]["ref"] == f"conflict:{conflict_id}"
    assert corrected["writer"]["id"] == str(other.credential.pk)
    assert corrected["expires_at"] is not None
    assert fact_values(writer)["order.limit"]["trust"] == "provisional"
    assert audit_events(tenant, "record.promote") == []
    assert _decision_hits(writer) == []


def test_it_refuses_an_agent_resolving_a_conflict_with_one_version_its_own(tenant, agent):
    _limit(agent, 50, "interaction:1")
    reviewer = make_agent(tenant, "read,write,review", name="reviewer-writer")
    contender = _limit(reviewer, 5000, "interaction:2")
    problem = assert_problem(_resolve(reviewer, contender["conflict"], "accept_new"), 403)
    assert "wrote" in problem["detail"]


def test_it_refuses_an_agent_approving_a_record_it_wrote(tenant, agent):
    reviewer = make_agent(tenant, "read,write,review", name="reviewer-writer")
    first = _limit(reviewer, 50, "interaction:1")
    request_id = _limit(agent, 50, "interaction:2")["promotion_request"]
    assert request_id
    approve = reviewer.post(f"/api/v1/promotion-requests/{request_id}/approve", {"reason": "ok"})
    assert_problem(approve, 403)
    assert writer_trust(reviewer, first["id"]) == "provisional"


def writer_trust(agent, record_id):
    return agent.get(f"{RECORDS}/{record_id}").json()["trust"]


@pytest.mark.parametrize("decision", ["approve", "reject"])
@pytest.mark.parametrize("payload", [{}, {"reason": ""}, {"reason": "   "}])
def test_it_requires_a_reason_to_decide_a_promotion(tenant, agent, decision, payload):
    _limit(agent, 50, "interaction:1")
    request_id = _limit(make_agent(tenant, name="witness"), 50, "interaction:2")[
        "promotion_request"
    ]
    reviewer = make_agent(tenant, "read,review", name="reviewer")
    response = reviewer.post(f"/api/v1/promotion-requests/{request_id}/{decision}", payload)
    problem = assert_problem(response, 400)
    assert "reason" in problem["errors"]
    listed = reviewer.get("/api/v1/promotion-requests", {"state": "open"}).json()["results"]
    assert [item["id"] for item in listed] == [request_id]


def test_it_keeps_an_agent_claimed_user_action_provisional_and_stamped_as_the_agent(agent):
    # API.md lists user_action among a write's source kinds: the agent may report that its
    # user did something, but that claim earns no trust and names the credential as writer.
    record = write_ok(agent, source__kind="user_action", content="order limit 7", **LIMIT)
    assert record["trust"] == "provisional"
    assert record["writer"]["type"] == "credential"
    assert _decision_hits(agent) == []
