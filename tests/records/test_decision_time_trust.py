"""Decision-time trust (issue #34): whether a fact still applies. A confirmed value that a
third agent contradicts is in open conflict, and every read an agent decides on says so:
search hits (decision ones included, marked), facts, and fact checks (not safe to act on)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from apps.audit.models import AuditEvent
from apps.tenancy.context import tenant_scope
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


def test_a_decision_search_returns_a_memory_in_open_conflict_marked(contradicted, tenant):
    agent, record = contradicted["agent"], contradicted["record"]
    answer = agent.post(
        "/api/v1/search", {"query": "refund limit", "scope": SCOPE, "purpose": "decision"}
    ).json()
    # The current value holds until a reviewer resolves the conflict: the decision search
    # returns it, and says it is disputed.
    [hit] = answer["results"]
    assert hit["record"]["id"] == record["id"]
    assert (hit["in_conflict"], hit["conflict"]) == (True, contradicted["conflict"])
    assert hit["confirmed_by"]["kind"] == "observation"
    with tenant_scope(tenant.pk):
        event = AuditEvent.objects.get(action="search.decision")
    assert event.data["in_conflict"] == [record["id"]]


def test_facts_carry_the_open_conflict(contradicted):
    agent, record = contradicted["agent"], contradicted["record"]
    facts = agent.get("/api/v1/facts", {"subject": "policy:refunds"}).json()["results"]
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


# --- trust on facts and checks, and who confirmed a value ----------------------------------


def provisional_and_confirmed(tenant):
    """Two facts of policy:refunds: refund.limit confirmed (by a reviewing credential),
    refund.window provisional."""
    writer = make_agent(tenant, name="writer")
    reviewer = make_agent(tenant, "read,review", name="reviewer-bot")
    limit = refund_limit(writer, 200, "interaction:1").json()
    opened = writer.post(
        f"/api/v1/records/{limit['id']}/promotion-requests", {"reason": "the policy says so"}
    )
    assert opened.status_code == 201, opened.json()
    approved = reviewer.post(
        f"/api/v1/promotion-requests/{opened.json()['id']}/approve", {"reason": "checked"}
    )
    assert approved.status_code == 200, approved.json()
    window = writer.post(
        "/api/v1/records",
        body(key="refund.window", subject="policy:refunds", value="P14D", scope=SCOPE),
    ).json()
    return writer, reviewer, limit, window


def test_facts_take_trust_and_say_who_confirmed_each(tenant):
    writer, reviewer, limit, _ = provisional_and_confirmed(tenant)
    everything = writer.get("/api/v1/facts", {"subject": "policy:refunds"}).json()["results"]
    by_key = {fact["key"]: fact for fact in everything}
    assert by_key["refund.window"]["trust"] == "provisional"
    assert by_key["refund.window"]["confirmed_by"] is None
    confirmed_by = by_key["refund.limit"]["confirmed_by"]
    assert (confirmed_by["kind"], confirmed_by["id"], confirmed_by["label"]) == (
        "credential",
        str(reviewer.credential.pk),
        "reviewer-bot",
    )
    confirmed = writer.get("/api/v1/facts", {"subject": "policy:refunds", "trust": "confirmed"})
    assert confirmed.status_code == 200, confirmed.json()
    assert [fact["id"] for fact in confirmed.json()["results"]] == [limit["id"]]


def test_a_fact_confirmed_by_a_second_observation_says_so(contradicted):
    agent, record = contradicted["agent"], contradicted["record"]
    [fact] = agent.get("/api/v1/facts", {"subject": "policy:refunds"}).json()["results"]
    detail = agent.get(f"/api/v1/records/{record['id']}").json()
    second = detail["observations"][-1]
    assert fact["confirmed_by"]["kind"] == "observation"
    assert fact["confirmed_by"]["id"] == second["id"]


def test_a_fact_check_says_a_provisional_value_is_not_safe_for_an_irreversible_step(tenant):
    writer, _, limit, window = provisional_and_confirmed(tenant)
    refs = [{"id": limit["id"]}, {"id": window["id"]}]
    answer = writer.post("/api/v1/facts/check", {"facts": refs}).json()
    checks = {check["id"]: check for check in answer["facts"]}
    assert checks[limit["id"]]["safe_to_act"] is True
    assert checks[limit["id"]]["confirmed_by"]["kind"] == "credential"
    assert checks[window["id"]]["current"] is True
    assert checks[window["id"]]["safe_to_act"] is False
    assert checks[window["id"]]["unsafe_reasons"] == ["provisional"]
    assert answer["unsafe"] == 1
    # For a step that can be undone, the caller may accept a provisional value.
    lenient = writer.post("/api/v1/facts/check", {"facts": refs, "trust": "provisional"}).json()
    assert [check["safe_to_act"] for check in lenient["facts"]] == [True, True]


def test_a_search_hit_says_who_confirmed_it(tenant):
    writer, _, limit, _ = provisional_and_confirmed(tenant)
    answer = writer.post(
        "/api/v1/search", {"query": "refund limit", "scope": SCOPE, "purpose": "decision"}
    ).json()
    [hit] = answer["results"]
    assert hit["record"]["id"] == limit["id"]
    assert hit["confirmed_by"]["kind"] == "credential"
    assert (hit["in_conflict"], hit["conflict"]) == (False, None)


# --- a tenant that reserves promotions to a person ----------------------------------------


def test_a_credentials_approval_is_refused_when_promotions_need_a_person(tenant):
    Tenant.objects.filter(pk=tenant.pk).update(promotion_requires_person=True)
    writer = make_agent(tenant, name="writer")
    reviewer = make_agent(tenant, "read,review", name="reviewer-bot")
    record = refund_limit(writer, 200, "interaction:1").json()
    opened = writer.post(
        f"/api/v1/records/{record['id']}/promotion-requests", {"reason": "the policy says so"}
    ).json()
    refused = reviewer.post(
        f"/api/v1/promotion-requests/{opened['id']}/approve", {"reason": "checked"}
    )
    assert refused.status_code == 403
    problem = refused.json()
    assert refused["Content-Type"] == "application/problem+json"
    assert problem["policy"] == "promotion_requires_person"
    assert "promotion_requires_person" in problem["detail"]
    assert writer.get(f"/api/v1/records/{record['id']}").json()["trust"] == "provisional"
    state = reviewer.get("/api/v1/promotion-requests", {"state": "open"}).json()
    assert [item["id"] for item in state["results"]] == [opened["id"]]


def test_a_second_observation_asks_a_person_when_promotions_need_one(tenant):
    Tenant.objects.filter(pk=tenant.pk).update(
        auto_promote_on_second_observation=True, promotion_requires_person=True
    )
    first, second = make_agent(tenant, name="one"), make_agent(tenant, name="two")
    refund_limit(first, 200, "interaction:1")
    observed = refund_limit(second, 200, "interaction:2").json()
    assert observed["trust"] == "provisional"
    assert observed["promotion_request"] is not None


def test_a_persons_approval_is_one_a_fact_names(client, tenant, reviewer):
    Tenant.objects.filter(pk=tenant.pk).update(promotion_requires_person=True)
    writer = make_agent(tenant, name="writer")
    record = refund_limit(writer, 200, "interaction:1").json()
    opened = writer.post(
        f"/api/v1/records/{record['id']}/promotion-requests", {"reason": "the policy says so"}
    ).json()
    client.force_login(reviewer)
    approve = reverse(
        "console:review-approve", kwargs={"tenant_slug": tenant.slug, "request_id": opened["id"]}
    )
    assert client.post(approve, {"reason": "checked with finance"}).status_code == 302
    [fact] = writer.get("/api/v1/facts", {"subject": "policy:refunds"}).json()["results"]
    assert fact["confirmed_by"]["kind"] == "person"
    assert (fact["confirmed_by"]["id"], fact["confirmed_by"]["label"]) == (
        str(reviewer.pk),
        reviewer.get_username(),
    )
