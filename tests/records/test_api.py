"""``/api/v1/records``, ``/facts``, ``/conflicts``, ``/promotion-requests``: outcomes, review,
versions, expiry, consent and deletion, as an agent sees them."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.api.models import IdempotencyKey
from apps.audit.models import DeletionReceipt
from apps.core.actors import Actor
from apps.governance import services as governance
from apps.records import signals
from apps.records.models import (
    Conflict,
    ConsentRevocation,
    Fact,
    MemoryRecord,
    Observation,
    PromotionEvent,
    PromotionRequest,
)
from apps.tenancy.context import tenant_scope
from tests.api.support import assert_problem
from tests.conftest import make_agent

from .factories import body
from .support import (
    FACTS,
    RECORDS,
    audit_events,
    audit_row_text,
    expire,
    fact_values,
    listed_ids,
    row_counts,
    ts,
    write,
    write_ok,
)

pytestmark = pytest.mark.django_db


def _conflict(agent, new_value="carrier_b"):
    """v1 (carrier_a) current, v2 contending; returns (v1, v2) response bodies."""
    first = write_ok(agent)
    second = write_ok(agent, value=new_value, source__ref="interaction:5000")
    assert second["outcome"] == "conflict"
    return first, second


def _resolve(reviewer, conflict_id, resolution, **extra):
    payload = {"resolution": resolution, "reason": "checked with the customer", **extra}
    return reviewer.post(f"/api/v1/conflicts/{conflict_id}/resolve", payload)


def _record(agent, record_id):
    response = agent.get(f"{RECORDS}/{record_id}")
    assert response.status_code == 200, response.content[:500]
    return response.json()


def _promotion_request(agent, second_agent):
    """A record written by ``agent`` and observed by ``second_agent``: an open request."""
    first = write_ok(agent)
    observed = write_ok(second_agent, source__ref="interaction:9001")
    assert observed["promotion_request"], observed
    return first, observed["promotion_request"]


# --- write outcomes ---------------------------------------------------------------------------


def test_it_creates_a_first_version_provisional_and_current(agent):
    response = write(agent)
    assert response.status_code == 201
    record = response.json()
    assert record["outcome"] == "created"
    assert record["version"] == 1
    assert record["trust"] == "provisional"
    assert record["status"] == "active"
    assert record["supersedes"] is None
    assert record["conflict"] is None
    assert record["key"] == "shipping.preference"
    assert record["source"]["ref"] == "interaction:4821"


def test_it_stamps_the_writer_from_the_credential(agent):
    record = write_ok(agent)
    assert record["writer"] == {
        "type": "credential",
        "id": str(agent.credential.pk),
        "label": agent.credential.name,
    }


def test_it_answers_200_and_changes_nothing_for_the_same_source_again(agent, tenant):
    first = write_ok(agent)
    before = row_counts(tenant)
    response = write(agent)
    assert response.status_code == 200
    assert response.json()["outcome"] == "unchanged"
    assert response.json()["id"] == first["id"]
    assert row_counts(tenant) == before
    assert audit_events(tenant, "record.observe") == []


def test_it_treats_the_same_source_from_another_credential_as_unchanged(agent, second_agent):
    write_ok(agent)
    response = write(second_agent)
    assert response.status_code == 200
    assert response.json()["outcome"] == "unchanged"


def test_it_records_an_independent_observation_and_opens_a_promotion_request(
    agent, second_agent, tenant
):
    first = write_ok(agent)
    response = write(second_agent, source__ref="interaction:9001")
    assert response.status_code == 201
    observed = response.json()
    assert observed["outcome"] == "observed"
    assert observed["id"] == first["id"]
    assert observed["trust"] == "provisional"
    with tenant_scope(tenant.pk):
        assert Observation.objects.filter(record_id=first["id"]).count() == 2
        request = PromotionRequest.objects.get(record_id=first["id"])
    assert str(request.pk) == observed["promotion_request"]
    assert request.state == "open"
    assert [e.action for e in audit_events(tenant, "promotion.request")] == ["promotion.request"]


def test_it_does_not_let_a_writer_corroborate_itself_with_another_ref(agent, tenant):
    first = write_ok(agent)
    response = write(agent, source__ref="interaction:9001")
    assert response.status_code == 201
    observed = response.json()
    assert observed["outcome"] == "observed"
    assert observed["promotion_request"] is None
    assert observed["notices"]
    with tenant_scope(tenant.pk):
        assert Observation.objects.filter(record_id=first["id"]).count() == 2
        assert PromotionRequest.objects.count() == 0


def test_it_adds_a_third_observation_to_the_open_request(agent, second_agent, tenant):
    _, request_id = _promotion_request(agent, second_agent)
    third = make_agent(tenant, name="third-writer")
    observed = write_ok(third, source__ref="interaction:9002")
    assert observed["promotion_request"] == request_id
    with tenant_scope(tenant.pk):
        assert PromotionRequest.objects.count() == 1
        assert len(PromotionRequest.objects.get().evidence["observations"]) == 3


def test_it_promotes_at_once_where_the_tenant_auto_promotes(agent, second_agent, tenant):
    tenant.auto_promote_on_second_observation = True
    tenant.save(update_fields=["auto_promote_on_second_observation"])
    first = write_ok(agent)
    observed = write_ok(second_agent, source__ref="interaction:9001")
    assert observed["outcome"] == "observed"
    assert observed["trust"] == "confirmed"
    assert observed["promotion_request"] is None
    assert _record(agent, first["id"])["trust"] == "confirmed"
    with tenant_scope(tenant.pk):
        event = PromotionEvent.objects.get(record_id=first["id"])
        assert PromotionRequest.objects.count() == 0
    assert event.promoted_by_type == "system"
    assert len(event.evidence["observations"]) == 2
    assert [e.object_id for e in audit_events(tenant, "record.promote")] == [first["id"]]


def test_it_does_not_auto_promote_on_the_writers_own_second_observation(agent, tenant):
    tenant.auto_promote_on_second_observation = True
    tenant.save(update_fields=["auto_promote_on_second_observation"])
    first = write_ok(agent)
    write_ok(agent, source__ref="interaction:9001")
    assert _record(agent, first["id"])["trust"] == "provisional"


def test_it_opens_a_conflict_for_a_different_value(agent, tenant):
    first, second = _conflict(agent)
    assert second["version"] == 2
    assert second["trust"] == "provisional"
    assert second["status"] == "active"
    assert second["supersedes"] == first["id"]
    assert second["conflict"]
    with tenant_scope(tenant.pk):
        conflict = Conflict.objects.get()
    assert str(conflict.pk) == second["conflict"]
    assert str(conflict.current_record_id) == first["id"]
    assert conflict.state == "open"
    assert [e.action for e in audit_events(tenant, "conflict.open")] == ["conflict.open"]


def test_it_keeps_the_current_value_current_during_a_conflict(agent):
    first, _ = _conflict(agent)
    fact = fact_values(agent)["shipping.preference"]
    assert fact["id"] == first["id"]
    assert fact["value"] == "carrier_a"
    assert _record(agent, first["id"])["status"] == "active"


def test_it_shows_the_open_conflict_on_both_versions(agent):
    first, second = _conflict(agent)
    assert _record(agent, first["id"])["conflict"] == second["conflict"]
    assert _record(agent, second["id"])["conflict"] == second["conflict"]


def test_it_observes_a_contender_instead_of_opening_a_second_conflict(agent, second_agent, tenant):
    _, second = _conflict(agent)
    observed = write_ok(second_agent, value="carrier_b", source__ref="interaction:9001")
    assert observed["outcome"] == "observed"
    assert observed["id"] == second["id"]
    with tenant_scope(tenant.pk):
        assert Conflict.objects.count() == 1
        assert MemoryRecord.objects.count() == 2


def test_it_reads_the_version_chain_in_history(agent):
    first, second = _conflict(agent)
    response = agent.get(f"{RECORDS}/{second['id']}/history")
    assert response.status_code == 200
    versions = response.json()["versions"]
    assert [(v["id"], v["version"]) for v in versions] == [(first["id"], 1), (second["id"], 2)]


def test_it_shows_provenance_observations_and_versions_in_detail(agent, second_agent):
    first = write_ok(agent)
    write_ok(second_agent, source__ref="interaction:9001")
    detail = _record(agent, first["id"])
    assert detail["provenance"]["source"]["ref"] == "interaction:4821"
    assert detail["provenance"]["observations"] == 2
    assert [o["source"]["ref"] for o in detail["observations"]] == [
        "interaction:4821",
        "interaction:9001",
    ]
    assert [v["version"] for v in detail["versions"]] == [1]
    assert detail["derived"] == {"summaries": [], "embeddings": []}


def test_a_record_detail_fails_loudly_when_no_app_describes_derived_artifacts(
    agent, monkeypatch, caplog
):
    # The derivations app receives the contract (apps/derivations/receivers.py); without a
    # receiver the detail must not claim that nothing was derived.
    record = write_ok(agent)
    monkeypatch.setattr(signals.derived_artifacts, "receivers", [])
    assert_problem(agent.get(f"{RECORDS}/{record['id']}"), 500)
    logged = [r.exc_info[1] for r in caplog.records if r.exc_info]
    assert any(isinstance(e, LookupError) for e in logged), "logged as the error it is"


# --- lifetimes --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sensitivity", "days"),
    [("restricted", 7), ("personal", 30), ("internal", 90), ("public", 365)],
)
def test_it_expires_a_provisional_record_by_its_class_rule(agent, sensitivity, days):
    record = write_ok(agent, sensitivity=sensitivity, retention__ttl=None)
    assert ts(record["expires_at"]) - ts(record["observed_at"]) == timedelta(days=days)
    assert record["notices"] == []


def test_it_keeps_a_ttl_shorter_than_the_class_rule(agent):
    record = write_ok(agent, retention__ttl="P7D")
    assert ts(record["expires_at"]) - ts(record["observed_at"]) == timedelta(days=7)
    assert record["notices"] == []
    assert record["retention"]["ttl"] == "P7D"


def test_it_clips_a_ttl_beyond_the_class_rule_and_says_so(agent):
    record = write_ok(agent, sensitivity="restricted", retention__ttl="P400D")
    assert ts(record["expires_at"]) - ts(record["observed_at"]) == timedelta(days=7)
    assert any("clipped" in notice for notice in record["notices"])
    assert record["retention"]["ttl"] == "P400D"  # what was asked for stays on record


def test_it_keeps_sub_day_ttls(agent):
    record = write_ok(agent, retention__ttl="PT1H30M")
    assert ts(record["expires_at"]) - ts(record["observed_at"]) == timedelta(hours=1, minutes=30)
    assert record["retention"]["ttl"] == "PT1H30M"


@pytest.mark.parametrize(
    ("sensitivity", "days"),
    [("restricted", 90), ("personal", 365), ("internal", 730), ("public", None)],
)
def test_it_gives_a_promoted_record_the_confirmed_lifetime(
    agent, second_agent, review_agent, sensitivity, days
):
    first = write_ok(agent, sensitivity=sensitivity, retention__ttl=None)
    request_id = write_ok(second_agent, sensitivity=sensitivity, source__ref="interaction:9001")[
        "promotion_request"
    ]
    approved = review_agent.post(
        f"/api/v1/promotion-requests/{request_id}/approve", {"reason": "ok"}
    )
    assert approved.status_code == 200, approved.content
    record = _record(agent, first["id"])
    assert record["trust"] == "confirmed"
    if days is None:
        assert record["expires_at"] is None
    else:
        assert ts(record["expires_at"]) - ts(record["observed_at"]) == timedelta(days=days)


def test_it_keeps_a_requested_ttl_after_promotion(agent, second_agent, review_agent):
    first = write_ok(agent, retention__ttl="P100D")  # personal: clipped to 30 days at first
    assert ts(first["expires_at"]) - ts(first["observed_at"]) == timedelta(days=30)
    request_id = write_ok(second_agent, source__ref="interaction:9001")["promotion_request"]
    review_agent.post(f"/api/v1/promotion-requests/{request_id}/approve", {"reason": "ok"})
    record = _record(agent, first["id"])
    assert ts(record["expires_at"]) - ts(record["observed_at"]) == timedelta(days=100)


# --- conflict resolution ----------------------------------------------------------------------


def test_it_keeps_the_current_value_on_keep_current(agent, review_agent):
    first, second = _conflict(agent)
    response = _resolve(review_agent, second["conflict"], "keep_current")
    assert response.status_code == 200, response.content
    assert response.json()["state"] == "resolved"
    assert response.json()["resolution"] == "keep_current"
    loser = _record(agent, second["id"])
    assert loser["status"] == "superseded"
    assert loser["superseded_by"] == first["id"]
    assert _record(agent, first["id"])["status"] == "active"
    assert fact_values(agent)["shipping.preference"]["id"] == first["id"]


def test_it_makes_the_new_value_current_on_accept_new(agent, review_agent):
    first, second = _conflict(agent)
    assert _resolve(review_agent, second["conflict"], "accept_new").status_code == 200
    old = _record(agent, first["id"])
    assert old["status"] == "superseded"
    assert old["superseded_by"] == second["id"]
    assert old["superseded_at"]
    new = _record(agent, second["id"])
    assert new["status"] == "active"
    assert new["trust"] == "provisional"
    fact = fact_values(agent)["shipping.preference"]
    assert (fact["id"], fact["value"]) == (second["id"], "carrier_b")


def test_it_writes_a_provisional_derived_version_on_an_agents_corrected(
    agent, review_agent, tenant
):
    first, second = _conflict(agent)
    response = _resolve(review_agent, second["conflict"], "corrected", value="carrier_c")
    assert response.status_code == 200, response.content
    winner_id = response.json()["resolved_record"]
    winner = _record(agent, winner_id)
    assert winner["version"] == 3
    assert winner["value"] == "carrier_c"
    assert winner["source"]["kind"] == "derived"
    assert winner["trust"] == "provisional"
    assert winner["writer"]["id"] == str(review_agent.credential.pk)
    for loser in (first, second):
        assert _record(agent, loser["id"])["superseded_by"] == winner_id
        assert _record(agent, loser["id"])["status"] == "superseded"
    fact = fact_values(agent)["shipping.preference"]
    assert (fact["id"], fact["value"], fact["trust"]) == (winner_id, "carrier_c", "provisional")


def test_it_never_deletes_the_loser_of_a_resolution(agent, review_agent, tenant):
    _, second = _conflict(agent)
    _resolve(review_agent, second["conflict"], "keep_current")
    with tenant_scope(tenant.pk):
        assert MemoryRecord.objects.count() == 2
    history = agent.get(f"{RECORDS}/{second['id']}/history").json()["versions"]
    assert [v["status"] for v in history] == ["active", "superseded"]


def test_it_audits_a_resolution_without_the_value(agent, review_agent, tenant):
    _, second = _conflict(agent)
    _resolve(review_agent, second["conflict"], "corrected", value="carrier-secret-77")
    [event] = audit_events(tenant, "conflict.resolve")
    assert event.object_id == second["conflict"]
    assert event.actor_id == str(review_agent.credential.pk)
    assert event.data["resolution"] == "corrected"
    assert "carrier-secret-77" not in audit_row_text(event)


def test_it_answers_409_when_resolving_twice(agent, review_agent):
    _, second = _conflict(agent)
    assert _resolve(review_agent, second["conflict"], "keep_current").status_code == 200
    assert_problem(_resolve(review_agent, second["conflict"], "accept_new"), 409)
    assert _record(agent, second["id"])["status"] == "superseded"


def test_it_requires_a_value_for_a_corrected_resolution(agent, review_agent):
    _, second = _conflict(agent)
    problem = assert_problem(_resolve(review_agent, second["conflict"], "corrected"), 400)
    assert "value" in problem["errors"]


@pytest.mark.parametrize("resolution", ["keep_current", "accept_new"])
def test_it_refuses_a_value_with_a_resolution_that_keeps_a_written_one(
    agent, review_agent, tenant, resolution
):
    first, second = _conflict(agent)
    response = _resolve(review_agent, second["conflict"], resolution, value="carrier_c")
    problem = assert_problem(response, 400)
    assert list(problem["errors"]) == ["value"]
    assert "corrected" in problem["errors"]["value"][0]
    with tenant_scope(tenant.pk):
        assert Conflict.objects.get().state == "open"
    assert _record(agent, first["id"])["status"] == "active"


def test_it_takes_a_null_value_as_none_with_keep_current(agent, review_agent):
    _, second = _conflict(agent)
    response = _resolve(review_agent, second["conflict"], "keep_current", value=None)
    assert response.status_code == 200, response.content


def test_it_refuses_a_corrected_value_the_database_cannot_store(agent, review_agent, tenant):
    _, second = _conflict(agent)
    response = _resolve(review_agent, second["conflict"], "corrected", value={"a": "\u0000"})
    problem = assert_problem(response, 400)
    assert list(problem["errors"]) == ["value.a"]
    with tenant_scope(tenant.pk):
        assert Conflict.objects.get().state == "open"


def test_it_refuses_an_unknown_resolution(agent, review_agent):
    _, second = _conflict(agent)
    problem = assert_problem(_resolve(review_agent, second["conflict"], "merge"), 400)
    assert "resolution" in problem["errors"]


def test_it_forbids_resolving_without_the_review_action(agent):
    _, second = _conflict(agent)
    assert_problem(_resolve(agent, second["conflict"], "accept_new"), 403)


def test_it_hides_a_conflict_from_another_tenants_reviewer(agent, other_agent):
    _, second = _conflict(agent)
    assert_problem(_resolve(other_agent, second["conflict"], "accept_new"), 404)
    assert other_agent.get("/api/v1/conflicts").json()["results"] == []


def test_it_lists_open_conflicts_for_review(agent, review_agent):
    _, second = _conflict(agent)
    listed = review_agent.get("/api/v1/conflicts", {"state": "open"}).json()["results"]
    assert [c["id"] for c in listed] == [second["conflict"]]
    _resolve(review_agent, second["conflict"], "keep_current")
    assert review_agent.get("/api/v1/conflicts", {"state": "open"}).json()["results"] == []


def test_it_moves_other_open_conflicts_to_the_new_current(agent, review_agent, tenant):
    _, second = _conflict(agent)
    third = write_ok(agent, value="carrier_c", source__ref="interaction:6000")
    _resolve(review_agent, second["conflict"], "accept_new")
    with tenant_scope(tenant.pk):
        remaining = Conflict.objects.get(pk=third["conflict"])
    assert str(remaining.current_record_id) == second["id"]
    _resolve(review_agent, third["conflict"], "accept_new")
    assert fact_values(agent)["shipping.preference"]["id"] == third["id"]
    assert _record(agent, second["id"])["superseded_by"] == third["id"]


# --- promotion review -------------------------------------------------------------------------


def test_it_forbids_approval_without_the_review_action(agent, second_agent):
    _, request_id = _promotion_request(agent, second_agent)
    response = second_agent.post(
        f"/api/v1/promotion-requests/{request_id}/approve", {"reason": "ok"}
    )
    body = assert_problem(response, 403)
    assert "review" in body["detail"]


def test_it_forbids_listing_promotion_requests_without_the_review_action(agent):
    assert_problem(agent.get("/api/v1/promotion-requests"), 403)


def test_it_hides_a_promotion_request_from_another_tenants_reviewer(
    agent, second_agent, other_agent
):
    first, request_id = _promotion_request(agent, second_agent)
    response = other_agent.post(
        f"/api/v1/promotion-requests/{request_id}/approve", {"reason": "ok"}
    )
    assert_problem(response, 404)
    assert _record(agent, first["id"])["trust"] == "provisional"


def test_it_forbids_the_writer_to_approve_its_own_record(review_agent, second_agent, tenant):
    first = write_ok(review_agent)
    request_id = write_ok(second_agent, source__ref="interaction:9001")["promotion_request"]
    response = review_agent.post(
        f"/api/v1/promotion-requests/{request_id}/approve", {"reason": "ok"}
    )
    assert_problem(response, 403)
    assert _record(review_agent, first["id"])["trust"] == "provisional"
    with tenant_scope(tenant.pk):
        assert PromotionRequest.objects.get().state == "open"
        assert PromotionEvent.objects.count() == 0


def test_it_promotes_on_an_independent_approval(agent, second_agent, review_agent, tenant):
    first, request_id = _promotion_request(agent, second_agent)
    response = review_agent.post(
        f"/api/v1/promotion-requests/{request_id}/approve", {"reason": "confirmed by phone"}
    )
    assert response.status_code == 200, response.content
    assert response.json()["state"] == "approved"
    assert response.json()["decided_by"]["id"] == str(review_agent.credential.pk)
    assert _record(agent, first["id"])["trust"] == "confirmed"
    with tenant_scope(tenant.pk):
        event = PromotionEvent.objects.get()
    assert str(event.request_id) == request_id
    assert event.promoted_by_id == str(review_agent.credential.pk)


def test_it_audits_an_approval_and_the_promotion(agent, second_agent, review_agent, tenant):
    first, request_id = _promotion_request(agent, second_agent)
    review_agent.post(f"/api/v1/promotion-requests/{request_id}/approve", {"reason": "ok"})
    [approve] = audit_events(tenant, "promotion.approve")
    [promote] = audit_events(tenant, "record.promote")
    assert approve.object_id == request_id
    assert promote.object_id == first["id"]
    assert approve.actor_id == promote.actor_id == str(review_agent.credential.pk)
    assert promote.seq > approve.seq


def test_it_leaves_a_rejected_record_provisional(agent, second_agent, review_agent, tenant):
    first, request_id = _promotion_request(agent, second_agent)
    response = review_agent.post(
        f"/api/v1/promotion-requests/{request_id}/reject", {"reason": "unverified"}
    )
    assert response.status_code == 200
    assert response.json()["state"] == "rejected"
    assert _record(agent, first["id"])["trust"] == "provisional"
    with tenant_scope(tenant.pk):
        assert PromotionEvent.objects.count() == 0
    assert [e.object_id for e in audit_events(tenant, "promotion.reject")] == [request_id]


def test_it_answers_409_when_deciding_twice(agent, second_agent, review_agent):
    _, request_id = _promotion_request(agent, second_agent)
    review_agent.post(f"/api/v1/promotion-requests/{request_id}/reject", {"reason": "ok"})
    response = review_agent.post(
        f"/api/v1/promotion-requests/{request_id}/approve", {"reason": "ok"}
    )
    assert_problem(response, 409)


def test_it_answers_409_for_a_duplicate_open_request(agent, tenant):
    first = write_ok(agent)
    path = f"{RECORDS}/{first['id']}/promotion-requests"
    created = agent.post(path, {"reason": "the user said so", "evidence": {"turn": "t-9"}})
    assert created.status_code == 201, created.content
    assert created.json()["state"] == "open"
    body = assert_problem(agent.post(path, {"reason": "again"}), 409)
    assert body["promotion_request"] == created.json()["id"]
    with tenant_scope(tenant.pk):
        assert PromotionRequest.objects.count() == 1


def test_it_lets_a_reviewer_approve_a_requested_promotion(agent, review_agent):
    first = write_ok(agent)
    request = agent.post(f"{RECORDS}/{first['id']}/promotion-requests", {"reason": "user said"})
    approve = f"/api/v1/promotion-requests/{request.json()['id']}/approve"
    assert review_agent.post(approve, {"reason": "ok"}).status_code == 200
    assert _record(agent, first["id"])["trust"] == "confirmed"


def test_it_refuses_a_promotion_request_for_a_confirmed_record(agent, second_agent, review_agent):
    first, request_id = _promotion_request(agent, second_agent)
    review_agent.post(f"/api/v1/promotion-requests/{request_id}/approve", {"reason": "ok"})
    response = agent.post(f"{RECORDS}/{first['id']}/promotion-requests", {"reason": "again"})
    assert_problem(response, 409)


def test_it_refuses_to_approve_a_superseded_record(agent, second_agent, review_agent):
    first, request_id = _promotion_request(agent, second_agent)
    conflict = write_ok(agent, value="carrier_b", source__ref="interaction:5000")["conflict"]
    _resolve(review_agent, conflict, "accept_new")
    response = review_agent.post(
        f"/api/v1/promotion-requests/{request_id}/approve", {"reason": "ok"}
    )
    assert_problem(response, 409)
    assert _record(agent, first["id"])["trust"] == "provisional"


def test_it_lists_open_promotion_requests(agent, second_agent, review_agent):
    _, request_id = _promotion_request(agent, second_agent)
    listed = review_agent.get("/api/v1/promotion-requests", {"state": "open"}).json()["results"]
    assert [r["id"] for r in listed] == [request_id]


# --- facts --------------------------------------------------------------------------------------


def test_it_lists_the_current_fact_of_each_key(agent):
    a = write_ok(agent)
    b = write_ok(agent, key="language", value="de", source__ref="interaction:1")
    write_ok(agent, subject="user:1", key="language", value="fr", source__ref="interaction:2")
    facts = fact_values(agent)
    assert set(facts) == {"shipping.preference", "language"}
    assert facts["language"]["id"] == b["id"]
    assert facts["shipping.preference"]["id"] == a["id"]
    assert {"value", "version", "trust", "observed_at", "source", "expires_at"} <= set(
        facts["language"]
    )


def test_it_requires_a_subject_for_facts(agent):
    problem = assert_problem(agent.get(FACTS), 400)
    assert "subject" in problem["errors"]


def test_it_rejects_an_as_of_without_zone(agent):
    problem = assert_problem(agent.get(FACTS, {"subject": "user:8812", "as_of": "2025-01-01"}), 400)
    assert "as_of" in problem["errors"]


def test_it_reads_facts_as_of_before_and_after_a_resolution(agent, review_agent):
    first, second = _conflict(agent)
    before = timezone.now()
    _resolve(review_agent, second["conflict"], "accept_new")
    after = timezone.now()
    then = fact_values(agent, as_of=before.isoformat().replace("+00:00", "Z"))
    now = fact_values(agent, as_of=after.isoformat().replace("+00:00", "Z"))
    assert then["shipping.preference"]["id"] == first["id"]
    assert now["shipping.preference"]["id"] == second["id"]


def test_it_reads_nothing_as_of_before_the_first_write(agent):
    before = (timezone.now() - timedelta(seconds=1)).isoformat().replace("+00:00", "Z")
    write_ok(agent)
    assert fact_values(agent, as_of=before) == {}


def test_it_reports_a_superseded_fact_as_stale_with_the_current_version(agent, review_agent):
    first, second = _conflict(agent)
    _resolve(review_agent, second["conflict"], "accept_new")
    response = agent.post(
        f"{FACTS}/check",
        {"facts": [{"id": first["id"], "version": 1}, {"id": second["id"], "version": 2}]},
    )
    assert response.status_code == 200
    old, new = response.json()["facts"]
    assert old["stale"] is True
    assert old["current"] is False
    assert (old["current_id"], old["current_version"]) == (second["id"], 2)
    assert new["stale"] is False
    assert new["current"] is True
    assert response.json()["stale"] == 1


def test_it_reports_a_current_fact_as_current(agent):
    first = write_ok(agent)
    response = agent.post(f"{FACTS}/check", {"facts": [{"id": first["id"], "version": 1}]})
    [check] = response.json()["facts"]
    assert (check["found"], check["current"], check["stale"]) == (True, True, False)


def test_it_hides_another_tenants_facts(agent, other_agent):
    write_ok(agent)
    assert fact_values(other_agent) == {}


# --- expiry is a read-time predicate ------------------------------------------------------------


def test_it_never_returns_an_expired_record_from_detail(agent, tenant):
    record = write_ok(agent)
    expire(tenant, record["id"])
    assert_problem(agent.get(f"{RECORDS}/{record['id']}"), 404)


def test_it_never_lists_an_expired_record(agent, tenant):
    kept = write_ok(agent, key="kept.fact")
    record = write_ok(agent)
    expire(tenant, record["id"])
    assert listed_ids(agent) == {kept["id"]}


def test_it_never_returns_an_expired_fact(agent, tenant):
    record = write_ok(agent)
    expire(tenant, record["id"])
    assert fact_values(agent) == {}


def test_it_never_returns_the_history_of_an_expired_record(agent, tenant):
    record = write_ok(agent)
    expire(tenant, record["id"])
    assert_problem(agent.get(f"{RECORDS}/{record['id']}/history"), 404)


def test_it_leaves_an_expired_version_out_of_a_live_records_history(agent, tenant):
    first, second = _conflict(agent)
    expire(tenant, first["id"])
    versions = agent.get(f"{RECORDS}/{second['id']}/history").json()["versions"]
    assert [v["id"] for v in versions] == [second["id"]]


def test_it_returns_no_record_as_of_a_time_its_lifetime_had_ended_by(agent, tenant):
    # expire() ends the lifetime before the write; test_facts_time covers expiry since.
    before = timezone.now().isoformat().replace("+00:00", "Z")
    record = write_ok(agent)
    after = timezone.now().isoformat().replace("+00:00", "Z")
    expire(tenant, record["id"])
    assert fact_values(agent, as_of=after) == {}
    assert fact_values(agent, as_of=before) == {}


def test_it_hides_the_content_of_an_expired_record_in_conflicts(agent, review_agent, tenant):
    _, second = _conflict(agent, new_value="carrier-expired-secret")
    expire(tenant, second["id"])
    response = review_agent.get("/api/v1/conflicts")
    assert response.status_code == 200
    assert "carrier-expired-secret" not in response.content.decode()


def test_it_starts_a_fresh_version_when_the_current_one_expired(agent, tenant):
    first = write_ok(agent)
    expire(tenant, first["id"])
    again = write_ok(agent, value="carrier_b", source__ref="interaction:7000")
    assert again["outcome"] == "created"
    assert again["version"] == 2
    assert again["conflict"] is None
    assert fact_values(agent)["shipping.preference"]["id"] == again["id"]


def test_it_shows_an_expired_record_under_legal_hold(agent, delete_agent, tenant):
    record = write_ok(agent)
    expire(tenant, record["id"])
    with tenant_scope(tenant.pk):
        governance.legal_hold_place(
            tenant=tenant, actor=Actor.system("legal"), reason="litigation", subject="user:8812"
        )
    assert _record(agent, record["id"])["id"] == record["id"]
    assert fact_values(agent)["shipping.preference"]["id"] == record["id"]
    assert_problem(delete_agent.delete(f"{RECORDS}/{record['id']}"), 409)
    assert row_counts(tenant)["records"] == 1


def test_it_blocks_deletion_of_a_live_record_under_a_fact_hold(agent, delete_agent, tenant):
    record = write_ok(agent)
    with tenant_scope(tenant.pk):
        fact = Fact.objects.get()
        governance.legal_hold_place(
            tenant=tenant, actor=Actor.system("legal"), reason="x", fact=fact
        )
    assert_problem(delete_agent.delete(f"{RECORDS}/{record['id']}"), 409)
    assert _record(agent, record["id"])["status"] == "active"


def test_it_hides_an_expired_record_again_once_the_hold_is_lifted(agent, tenant):
    record = write_ok(agent)
    expire(tenant, record["id"])
    with tenant_scope(tenant.pk):
        hold = governance.legal_hold_place(
            tenant=tenant, actor=Actor.system("legal"), reason="x", subject="user:8812"
        )
        governance.legal_hold_lift(hold=hold, actor=Actor.system("legal"), reason="case closed")
    assert_problem(agent.get(f"{RECORDS}/{record['id']}"), 404)


# --- consent revocation -------------------------------------------------------------------------


def _consent_write(agent, **overrides):
    return write_ok(
        agent, retention__basis="consent", retention__consent_ref="consent:77", **overrides
    )


def test_it_expires_everything_written_under_a_revoked_consent(agent, erase_agent, tenant):
    a = _consent_write(agent)
    b = _consent_write(agent, key="language", value="de")
    other = write_ok(agent, key="other.fact")
    response = erase_agent.post("/api/v1/consents/consent:77/revoke", {"reason": "user asked"})
    assert response.status_code == 200, response.content
    assert response.json()["records_expired"] == 2
    for record in (a, b):
        assert_problem(agent.get(f"{RECORDS}/{record['id']}"), 404)
    assert fact_values(agent).keys() == {"other.fact"}
    assert listed_ids(agent) == {other["id"]}


def test_it_revokes_a_consent_only_once(agent, erase_agent, tenant):
    _consent_write(agent)
    first = erase_agent.post("/api/v1/consents/consent:77/revoke", {"reason": "user asked"})
    second = erase_agent.post("/api/v1/consents/consent:77/revoke", {"reason": "user asked"})
    assert second.status_code == 200
    assert second.json() == first.json()
    with tenant_scope(tenant.pk):
        assert ConsentRevocation.objects.count() == 1
    assert len(audit_events(tenant, "consent.revoke")) == 1


def test_it_refuses_new_writes_citing_a_revoked_consent(agent, erase_agent, tenant):
    # Revoked before any write cites it: a reference never used needs force.
    revoked = erase_agent.post(
        "/api/v1/consents/consent:77/revoke", {"reason": "user asked", "force": True}
    )
    assert revoked.status_code == 200, revoked.content
    response = write(
        agent, retention__basis="consent", retention__consent_ref="consent:77", key="new.fact"
    )
    # Valid by itself, naming a consent that is revoked: 422, as a reference that no longer
    # resolves.
    problem = assert_problem(response, 422)
    assert "retention.consent_ref" in problem["errors"]
    assert row_counts(tenant)["records"] == 0
    [event] = audit_events(tenant, "record.write_rejected")
    assert event.data["fields"] == ["retention.consent_ref"]


@pytest.mark.parametrize("reason", [None, "", "   "])
def test_revoking_a_consent_needs_a_reason(agent, erase_agent, tenant, reason):
    record = _consent_write(agent)
    data = {} if reason is None else {"reason": reason}
    problem = assert_problem(erase_agent.post("/api/v1/consents/consent:77/revoke", data), 400)
    assert list(problem["errors"]) == ["reason"]
    assert _record(agent, record["id"])["status"] == "active"
    with tenant_scope(tenant.pk):
        assert not ConsentRevocation.objects.exists()


@pytest.mark.parametrize("ref", ["consent%2077", "consent:77%0D", "%22consent:77%22"])
def test_revoking_refuses_a_reference_that_is_no_identifier(agent, erase_agent, tenant, ref):
    _consent_write(agent)
    response = erase_agent.post(f"/api/v1/consents/{ref}/revoke", {"reason": "user asked"})
    assert list(assert_problem(response, 400)["errors"]) == ["consent_ref"]
    with tenant_scope(tenant.pk):
        assert not ConsentRevocation.objects.exists()


def test_a_write_cites_a_consent_by_an_identifier(agent, tenant):
    response = write(agent, retention__basis="consent", retention__consent_ref="consent 77")
    assert "retention.consent_ref" in assert_problem(response, 400)["errors"]
    assert row_counts(tenant)["records"] == 0


def test_revoking_a_reference_never_used_needs_force(agent, erase_agent, tenant):
    _consent_write(agent)  # under consent:77
    path = "/api/v1/consents/consent:78/revoke"
    problem = assert_problem(erase_agent.post(path, {"reason": "typo"}), 422)
    assert list(problem["errors"]) == ["consent_ref"]
    assert "force" in problem["detail"]
    with tenant_scope(tenant.pk):
        assert not ConsentRevocation.objects.exists()
    assert audit_events(tenant, "consent.revoke") == []

    forced = erase_agent.post(path, {"reason": "revoked ahead", "force": True})
    assert forced.status_code == 200, forced.content
    assert forced.json()["records_expired"] == 0
    used = erase_agent.post("/api/v1/consents/consent:77/revoke", {"reason": "user asked"})
    assert used.json()["records_expired"] == 1
    events = {
        e.data["target"]["consent_ref"]: e.data for e in audit_events(tenant, "consent.revoke")
    }
    assert (events["consent:78"]["reason"], events["consent:78"]["force"]) == (
        "revoked ahead",
        True,
    )
    assert (events["consent:77"]["reason"], events["consent:77"]["force"]) == ("user asked", False)


def test_it_forbids_revoking_a_consent_without_the_erase_action(agent):
    assert_problem(agent.post("/api/v1/consents/consent:77/revoke", {}), 403)


def test_it_keeps_a_held_record_when_its_consent_is_revoked(agent, erase_agent, tenant):
    record = _consent_write(agent)
    with tenant_scope(tenant.pk):
        governance.legal_hold_place(
            tenant=tenant, actor=Actor.system("legal"), reason="x", subject="user:8812"
        )
    response = erase_agent.post("/api/v1/consents/consent:77/revoke", {"reason": "user asked"})
    assert response.json()["records_expired"] == 0
    assert _record(agent, record["id"])["id"] == record["id"]


def test_it_expires_a_held_record_of_a_revoked_consent_once_the_hold_lifts(
    agent, erase_agent, tenant
):
    record = _consent_write(agent)
    with tenant_scope(tenant.pk):
        hold = governance.legal_hold_place(
            tenant=tenant, actor=Actor.system("legal"), reason="x", subject="user:8812"
        )
    erase_agent.post("/api/v1/consents/consent:77/revoke", {"reason": "user asked"})
    with tenant_scope(tenant.pk):
        governance.legal_hold_lift(hold=hold, actor=Actor.system("legal"), reason="case closed")
    assert_problem(agent.get(f"{RECORDS}/{record['id']}"), 404)


def test_it_does_not_leak_the_consent_revocation_to_another_tenant(agent, other_agent, tenant):
    record = _consent_write(agent)
    path = "/api/v1/consents/consent:77/revoke"
    # Another tenant's use of a reference is no use of it: refused as never used...
    refused = assert_problem(other_agent.post(path, {"reason": "user asked"}), 422)
    assert "consent_ref" in refused["errors"]
    # ...and revoked there alone when forced.
    response = other_agent.post(path, {"reason": "user asked", "force": True})
    assert response.json()["records_expired"] == 0
    assert _record(agent, record["id"])["status"] == "active"


# --- deletion -----------------------------------------------------------------------------------


def test_it_deletes_every_version_and_returns_a_receipt(agent, delete_agent, tenant):
    first, second = _conflict(agent)
    response = delete_agent.delete(f"{RECORDS}/{first['id']}")
    assert response.status_code == 200, response.content
    receipt = response.json()
    assert receipt["kind"] == "record"
    assert set(receipt["records"]) == {first["id"], second["id"]}
    assert receipt["counts"]["versions"] == 2
    assert receipt["counts"]["observations"] == 2
    assert receipt["counts"]["conflicts"] == 1
    assert re.fullmatch(r"[0-9a-f]{64}", receipt["content_digest"])
    assert receipt["requested_by"]["id"] == str(delete_agent.credential.pk)
    assert "carrier_a" not in response.content.decode()
    assert "carrier_b" not in response.content.decode()
    assert row_counts(tenant) == {"records": 0, "facts": 0, "observations": 0}
    with tenant_scope(tenant.pk):
        assert DeletionReceipt.objects.get().record_ids == receipt["records"]


def test_it_answers_404_everywhere_after_deletion(agent, delete_agent):
    first, second = _conflict(agent)
    delete_agent.delete(f"{RECORDS}/{second['id']}")
    for record in (first, second):
        assert_problem(agent.get(f"{RECORDS}/{record['id']}"), 404)
        assert_problem(agent.get(f"{RECORDS}/{record['id']}/history"), 404)
    assert listed_ids(agent) == set()
    assert fact_values(agent) == {}
    [check] = agent.post(f"{FACTS}/check", {"facts": [{"id": first["id"]}]}).json()["facts"]
    assert check["found"] is False


def test_it_audits_a_deletion_without_content(agent, delete_agent, tenant):
    record = write_ok(agent, value="carrier-secret-99", content="prefers carrier-secret-99")
    delete_agent.delete(f"{RECORDS}/{record['id']}")
    [event] = audit_events(tenant, "record.delete")
    assert event.data["records"] == [record["id"]]
    assert re.fullmatch(r"[0-9a-f]{64}", event.digest)
    for leaked in audit_events(tenant):
        assert "carrier-secret-99" not in audit_row_text(leaked)


def test_it_deletes_the_promotion_history_with_the_fact(agent, second_agent, review_agent, tenant):
    first, request_id = _promotion_request(agent, second_agent)
    review_agent.post(f"/api/v1/promotion-requests/{request_id}/approve", {"reason": "ok"})
    delete_agent = make_agent(tenant, "read,delete", name="deleter")
    receipt = delete_agent.delete(f"{RECORDS}/{first['id']}").json()
    assert receipt["counts"]["promotion_requests"] == 1
    with tenant_scope(tenant.pk):
        assert PromotionRequest.objects.count() == 0
        assert PromotionEvent.objects.count() == 0


def test_it_forbids_deletion_without_the_delete_action(agent, tenant):
    record = write_ok(agent)
    assert_problem(agent.delete(f"{RECORDS}/{record['id']}"), 403)
    assert row_counts(tenant)["records"] == 1


def test_it_answers_404_to_another_tenants_deletion(agent, other_agent, tenant):
    record = write_ok(agent)
    assert_problem(other_agent.delete(f"{RECORDS}/{record['id']}"), 404)
    assert row_counts(tenant)["records"] == 1
    assert _record(agent, record["id"])["id"] == record["id"]


def test_it_answers_404_for_a_malformed_record_id(agent):
    assert_problem(agent.get(f"{RECORDS}/not-a-uuid"), 404)


def test_it_tombstones_stored_responses_about_a_deleted_record(agent, delete_agent, tenant):
    record = agent.post(RECORDS, body(), headers={"Idempotency-Key": "w-1"})
    assert record.status_code == 201
    receipt = delete_agent.delete(f"{RECORDS}/{record.json()['id']}").json()
    assert receipt["counts"]["stored_responses"] == 1
    with tenant_scope(tenant.pk):
        # Only a content-free tombstone is left, so a retry replays "deleted".
        assert not IdempotencyKey.objects.filter(tombstone=False).exists()


# --- listing ------------------------------------------------------------------------------------


def test_it_filters_the_list(agent, second_agent, review_agent):
    a = write_ok(agent)
    b = write_ok(agent, key="language", value="de", sensitivity="internal", source__ref="i:2")
    c = write_ok(agent, subject="user:1", scope__domain="support", source__ref="i:3")
    assert listed_ids(agent, subject="user:8812") == {a["id"], b["id"]}
    assert listed_ids(agent, key="language") == {b["id"]}
    assert listed_ids(agent, domain="support") == {c["id"]}
    assert listed_ids(agent, sensitivity="internal") == {b["id"]}
    assert listed_ids(agent, trust="confirmed") == set()
    assert listed_ids(agent, status="active") == {a["id"], b["id"], c["id"]}


def test_it_never_lists_another_tenants_records(agent, other_agent):
    write_ok(agent)
    assert listed_ids(other_agent) == set()


# --- review inputs the database cannot store ----------------------------------------------------


def _raw_post(agent, path, raw):
    return agent.client.post(
        path, raw, content_type="application/json", headers=agent._headers(None)
    )


@pytest.mark.parametrize("endpoint", ["approve", "reject", "resolve", "request"])
def test_it_refuses_a_review_reason_with_an_unpaired_surrogate(
    agent, second_agent, review_agent, endpoint
):
    first, request_id = _promotion_request(agent, second_agent)
    conflict = write_ok(agent, value="carrier_b", source__ref="interaction:5000")["conflict"]
    who, path, raw = {
        "approve": (review_agent, f"/api/v1/promotion-requests/{request_id}/approve", "{%s}"),
        "reject": (review_agent, f"/api/v1/promotion-requests/{request_id}/reject", "{%s}"),
        "resolve": (
            review_agent,
            f"/api/v1/conflicts/{conflict}/resolve",
            '{"resolution": "keep_current", %s}',
        ),
        "request": (agent, f"{RECORDS}/{first['id']}/promotion-requests", "{%s}"),
    }[endpoint]
    problem = assert_problem(_raw_post(who, path, raw % '"reason": "\\ud800"'), 400)
    assert "reason" in problem["errors"]


def test_it_refuses_evidence_the_database_cannot_store(agent, tenant):
    first = write_ok(agent)
    raw = '{"reason": "user said", "evidence": {"note": "\\u0000"}}'
    problem = assert_problem(
        _raw_post(agent, f"{RECORDS}/{first['id']}/promotion-requests", raw), 400
    )
    assert list(problem["errors"]) == ["evidence.note"]
    with tenant_scope(tenant.pk):
        assert PromotionRequest.objects.count() == 0


# --- more reads -----------------------------------------------------------------------------------


def test_it_audits_an_observation_without_content(agent, second_agent, tenant):
    first = write_ok(agent)
    write_ok(second_agent, source__ref="interaction:9001")
    [event] = audit_events(tenant, "record.observe")
    assert event.object_id == first["id"]
    assert event.actor_id == str(second_agent.credential.pk)
    assert "carrier_a" not in audit_row_text(event)


def test_it_hides_the_promotion_request_of_an_expired_record(
    agent, second_agent, review_agent, tenant
):
    first, request_id = _promotion_request(agent, second_agent)
    expire(tenant, first["id"])
    assert review_agent.get("/api/v1/promotion-requests").json()["results"] == []
    response = review_agent.post(
        f"/api/v1/promotion-requests/{request_id}/approve", {"reason": "ok"}
    )
    assert_problem(response, 404)


def test_it_hides_promotion_requests_from_another_tenant(agent, second_agent, other_agent):
    _promotion_request(agent, second_agent)
    assert other_agent.get("/api/v1/promotion-requests").json()["results"] == []


def test_it_rejects_a_malformed_fact_check(agent):
    problem = assert_problem(agent.post(f"{FACTS}/check", {"facts": [{"id": "nope"}]}), 400)
    assert "facts[0].id" in problem["errors"]
    assert_problem(agent.post(f"{FACTS}/check", {"facts": []}), 400)


def test_it_accepts_a_ttl_in_weeks(agent):
    record = write_ok(agent, retention__ttl="P2W")
    assert ts(record["expires_at"]) - ts(record["observed_at"]) == timedelta(weeks=2)


@pytest.mark.parametrize("ttl", ["P1Y", "P6M", "P1Y2M10D"])
def test_it_explains_that_years_and_months_have_no_fixed_length(agent, ttl):
    problem = assert_problem(write(agent, retention__ttl=ttl), 400)
    assert "days" in problem["errors"]["retention.ttl"][0]


def test_it_keeps_one_current_version_per_key_after_the_old_one_expired(agent, tenant):
    """An expired current version that a later legal hold brings back into view must not
    appear next to the version written after it expired."""
    first = write_ok(agent)
    expire(tenant, first["id"])
    again = write_ok(agent, value="carrier_b", source__ref="interaction:7000")
    with tenant_scope(tenant.pk):
        governance.legal_hold_place(
            tenant=tenant, actor=Actor.system("legal"), reason="x", subject="user:8812"
        )
    response = agent.get(FACTS, {"subject": "user:8812"})
    assert [f["id"] for f in response.json()["results"]] == [again["id"]]
    [check] = agent.post(f"{FACTS}/check", {"facts": [{"id": first["id"]}]}).json()["facts"]
    assert check["current"] is False
