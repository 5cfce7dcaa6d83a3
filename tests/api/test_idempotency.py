"""``Idempotency-Key`` on POST: replay, mismatch, in flight, per credential, 24 hours, purge."""

from __future__ import annotations

import json
import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from apps.api.models import IdempotencyKey
from apps.records import services
from apps.records.models import MemoryRecord, Observation
from apps.tenancy.context import tenant_scope
from tests.conftest import make_agent
from tests.records.factories import body

from .contract import assert_conforms
from .support import assert_problem

pytestmark = pytest.mark.django_db

RECORDS = "/api/v1/records"


@pytest.fixture
def second_agent(tenant):
    return make_agent(tenant, name="second-writer")


def _post(agent, data, key, path=RECORDS):
    return agent.post(path, data, headers={"Idempotency-Key": key})


def _counts(tenant):
    with tenant_scope(tenant.pk):
        return MemoryRecord.objects.count(), Observation.objects.count()


def test_it_replays_the_first_response(agent, tenant):
    sent = body()  # one body: a retry sends the same bytes, observed_at included
    first = _post(agent, sent, "key-1")
    again = _post(agent, sent, "key-1")
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json()
    assert again["Idempotent-Replayed"] == "true"
    assert "Idempotent-Replayed" not in first
    assert _counts(tenant) == (1, 1)


def test_it_has_no_second_effect_on_replay(agent, second_agent, tenant):
    agent.post(RECORDS, body())
    data = body(source={"kind": "interaction", "ref": "interaction:9001"})
    first = _post(second_agent, data, "obs-1")
    assert first.json()["outcome"] == "observed"
    again = _post(second_agent, data, "obs-1")
    assert again.json() == first.json()
    assert again.status_code == 201  # the first answer, not "unchanged"
    assert _counts(tenant) == (1, 2)


def test_it_replays_a_body_with_members_in_another_order(agent, tenant):
    data = body()
    reordered = dict(reversed(list(data.items())))
    first = _post(agent, data, "key-order")
    again = _post(agent, reordered, "key-order")
    assert again["Idempotent-Replayed"] == "true"
    assert again.json()["id"] == first.json()["id"]


def test_it_answers_422_for_the_same_key_with_another_body(agent, tenant):
    _post(agent, body(), "key-2")
    response = _post(agent, body(value="carrier_b"), "key-2")
    problem = assert_problem(response, 422)
    assert "Idempotency-Key" in problem["detail"]
    assert _counts(tenant) == (1, 1)


def test_it_answers_422_for_the_same_key_on_another_endpoint(agent, tenant):
    record = _post(agent, body(), "key-3").json()
    path = f"{RECORDS}/{record['id']}/promotion-requests"
    assert_problem(_post(agent, {"reason": "user said"}, "key-3", path=path), 422)


def test_it_keeps_keys_per_credential(agent, second_agent, tenant):
    first = _post(agent, body(), "shared-key")
    other = _post(second_agent, body(source={"kind": "document", "ref": "doc:1"}), "shared-key")
    assert other.status_code == 201
    assert "Idempotent-Replayed" not in other
    assert other.json()["outcome"] == "observed"
    assert other.json()["id"] == first.json()["id"]
    assert _counts(tenant) == (1, 2)


def test_it_keeps_another_tenants_keys_apart(agent, other_agent, tenant, other_tenant):
    _post(agent, body(), "k")
    response = _post(other_agent, body(), "k")
    assert response.status_code == 201
    assert "Idempotent-Replayed" not in response
    assert _counts(other_tenant) == (1, 1)


def test_it_forgets_keys_after_24_hours(agent, tenant):
    first = _post(agent, body(), "old-key")
    with tenant_scope(tenant.pk):
        IdempotencyKey.objects.update(created_at=timezone.now() - timedelta(hours=24, minutes=1))
    again = _post(agent, body(value="carrier_b"), "old-key")  # no 422: the key is free again
    assert again.status_code == 201
    assert "Idempotent-Replayed" not in again
    assert again.json()["outcome"] == "conflict"
    assert again.json()["id"] != first.json()["id"]


def test_it_still_replays_within_24_hours(agent, tenant):
    sent = body()
    _post(agent, sent, "recent-key")
    with tenant_scope(tenant.pk):
        IdempotencyKey.objects.update(created_at=timezone.now() - timedelta(hours=23))
    assert _post(agent, sent, "recent-key")["Idempotent-Replayed"] == "true"


@pytest.mark.parametrize(
    "key",
    ["", "x" * 201, "tab\tkey", "caf\u00e9"],
    ids=["empty", "too-long", "control-character", "non-ascii"],
)
def test_it_rejects_an_invalid_key(agent, tenant, key):
    response = agent.post(
        RECORDS, body(), headers={"Idempotency-Key": key.encode().decode("latin-1")}
    )
    problem = assert_problem(response, 400)
    assert "Idempotency-Key" in problem["errors"]
    assert _counts(tenant) == (0, 0)


def test_it_does_not_store_a_rejected_request(agent, tenant):
    assert_problem(_post(agent, body(reason=""), "key-rejected"), 400)
    with tenant_scope(tenant.pk):
        assert IdempotencyKey.objects.count() == 0
    assert _post(agent, body(), "key-rejected").status_code == 201


def test_it_keeps_the_stored_response_to_the_tenant(agent, tenant, other_tenant):
    _post(agent, body(), "key-rls")
    with tenant_scope(other_tenant.pk):
        assert IdempotencyKey.objects.count() == 0
    with tenant_scope(tenant.pk):
        stored = IdempotencyKey.objects.get()
    assert stored.credential_id == agent.credential.pk


def test_it_tombstones_stored_review_responses_with_the_record(agent, second_agent, tenant):
    reviewer = make_agent(tenant, "read,review,delete", name="reviewer")
    record = agent.post(RECORDS, body()).json()
    observed = second_agent.post(RECORDS, body(source={"kind": "document", "ref": "d:1"})).json()
    approve = f"/api/v1/promotion-requests/{observed['promotion_request']}/approve"
    assert _post(reviewer, {"reason": "ok"}, "approve-1", path=approve).status_code == 200
    reviewer.delete(f"{RECORDS}/{record['id']}")
    with tenant_scope(tenant.pk):
        stored = list(IdempotencyKey.objects.all())
    assert [row.tombstone for row in stored] == [True], "the approval's response is a tombstone"
    assert set(stored[0].response_body) == {"id", "status", "detail"}


def test_it_fingerprints_a_body_with_an_unpaired_surrogate_without_failing(agent, tenant):
    raw = json.dumps(body()).replace('"carrier_a"', '"\\ud800"')
    response = agent.client.post(
        RECORDS,
        raw,
        content_type="application/json",
        headers=agent._headers({"Idempotency-Key": "key-surrogate"}),
    )
    problem = assert_problem(response, 400)
    assert "value" in problem["errors"]


def test_it_works_without_a_key(agent, tenant):
    assert agent.post(RECORDS, body()).status_code == 201
    with tenant_scope(tenant.pk):
        assert IdempotencyKey.objects.count() == 0


# --- in flight --------------------------------------------------------------------------------


def _client_copy(agent):
    """The same credential with its own test client (clients are not shared across threads)."""
    from django.test import Client

    from tests.conftest import Agent

    return Agent(Client(), agent.tenant, agent.token, agent.credential)


class HeldWrite:
    """Runs a POST in a thread whose ``record_write`` waits until released, so its
    Idempotency-Key stays in flight (its request transaction open) meanwhile."""

    def __init__(self, monkeypatch, agent, data, key, *, hold_for=10.0):
        self.entered, self.release = threading.Event(), threading.Event()
        self.hold_for = hold_for
        self.response = None
        original = services.record_write

        def slow_write(**kwargs):
            if kwargs["data"].key == data["key"] and not self.entered.is_set():
                self.entered.set()
                assert self.release.wait(self.hold_for)
            return original(**kwargs)

        monkeypatch.setattr(services, "record_write", slow_write)
        self.thread = threading.Thread(target=self._run, args=(agent, data, key))

    def _run(self, agent, data, key):
        try:
            self.response = _post(agent, data, key)
        finally:
            connection.close()

    def __enter__(self):
        self.thread.start()
        assert self.entered.wait(10), "the first request never reached the service"
        return self

    def __exit__(self, *exc):
        self.release.set()
        self.thread.join(15)


def _warm(agent):
    """Use the credential once, so no request in the test updates its last_used_at (that
    row lock would serialise the requests before the idempotency check runs)."""
    assert agent.get("/api/v1/me").status_code == 200


@pytest.mark.django_db(transaction=True)
def test_it_answers_409_while_the_first_request_is_in_flight(agent, tenant, monkeypatch):
    _warm(agent)
    sent = body()  # one body: each body() observes now, and a second may pass meanwhile
    with HeldWrite(monkeypatch, agent, sent, "key-in-flight") as first:
        second = _post(_client_copy(agent), sent, "key-in-flight")
        problem = assert_problem(second, 409)
        assert "in progress" in problem["detail"]
    assert first.response.status_code == 201
    third = _post(agent, sent, "key-in-flight")
    assert third["Idempotent-Replayed"] == "true"
    assert third.json() == first.response.json()
    assert _counts(tenant) == (1, 1)


@pytest.mark.django_db(transaction=True)
def test_it_answers_409_in_flight_even_for_another_body(agent, tenant, monkeypatch):
    _warm(agent)
    with HeldWrite(monkeypatch, agent, body(), "key-in-flight-2"):
        second = _post(_client_copy(agent), body(value="carrier_b"), "key-in-flight-2")
        assert_problem(second, 409)
    assert _counts(tenant) == (1, 1)


@pytest.mark.django_db(transaction=True)
def test_it_lets_another_key_through_while_one_is_in_flight(agent, tenant, monkeypatch):
    _warm(agent)
    with HeldWrite(monkeypatch, agent, body(key="slow.fact"), "key-a") as first:
        other = _post(_client_copy(agent), body(key="fast.fact"), "key-b")
        assert other.status_code == 201
    assert first.response.status_code == 201
    assert _counts(tenant) == (2, 2)


def test_it_replays_a_response_holding_timestamps_exactly(agent, tenant):
    eraser = make_agent(tenant, "read,erase", name="eraser")
    path = "/api/v1/consents/consent:1/revoke"
    first = _post(eraser, {"reason": "user asked", "force": True}, "revoke-1", path=path)
    again = _post(eraser, {"reason": "user asked", "force": True}, "revoke-1", path=path)
    assert again["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()


# --- after a deletion: a content-free tombstone, never a second write -------------------------


def test_it_answers_a_retry_after_the_record_is_deleted_with_a_410_and_writes_nothing(tenant):
    """The 201 stays the shape of a record (what a replay is); the tombstone is a 410 problem
    of its own, which the schema declares (``IdempotencyTombstone``)."""
    agent = make_agent(tenant, "read,write,delete", name="deleter")
    data = body(content="the customer's home address is 12 Elm Street")
    first = _post(agent, data, "key-deleted")
    assert first.status_code == 201
    record_id = first.json()["id"]
    assert agent.delete(f"{RECORDS}/{record_id}?reason=customer+asked").status_code == 200

    again = _post(agent, data, "key-deleted")
    problem = assert_problem(again, 410)
    assert_conforms(again, RECORDS, "POST")
    assert again["Idempotent-Replayed"] == "true"
    assert again["Idempotent-Tombstone"] == "true"
    assert problem["type"].endswith("/idempotency-tombstone")
    assert (problem["id"], problem["state"], problem["first_status"]) == (record_id, "deleted", 201)
    assert "Elm Street" not in again.content.decode()
    assert _counts(tenant) == (0, 0), "the retry wrote nothing"
    with tenant_scope(tenant.pk):
        stored = IdempotencyKey.objects.get(key="key-deleted")
    assert stored.tombstone
    assert "Elm Street" not in json.dumps(stored.response_body)


def test_it_still_refuses_the_same_key_with_another_body_after_a_deletion(tenant):
    agent = make_agent(tenant, "read,write,delete", name="deleter")
    first = _post(agent, body(), "key-deleted-2")
    agent.delete(f"{RECORDS}/{first.json()['id']}?reason=asked")
    assert_problem(_post(agent, body(value="other"), "key-deleted-2"), 422)


def test_it_leaves_a_tombstone_that_erasure_verification_accepts(tenant):
    agent = make_agent(tenant, "read,write,erase,audit", name="eraser")
    sent = body(subject="user:erased")
    _post(agent, sent, "key-erased")
    erased = agent.post("/api/v1/erasures", {"subject": "user:erased", "reason": "asked"})
    assert erased.status_code == 200, erased.content
    again = _post(agent, sent, "key-erased")
    assert_problem(again, 410)
    assert again["Idempotent-Tombstone"] == "true"
    assert _counts(tenant) == (0, 0)


# --- reads with effects: POST /search and POST /facts/check ------------------------------------


def _decision_search(agent, key, **overrides):
    payload = {"query": "carrier", "purpose": "decision", "scope": body()["scope"]}
    return agent.post("/api/v1/search", {**payload, **overrides}, headers={"Idempotency-Key": key})


def _decisions_audited(tenant):
    from apps.audit.models import AuditEvent

    with tenant_scope(tenant.pk):
        return list(
            AuditEvent.objects.filter(action="search.decision").values_list("data", flat=True)
        )


def _confirmed(agent, tenant, **overrides):
    record = agent.post(RECORDS, body(**overrides)).json()
    with tenant_scope(tenant.pk):
        MemoryRecord.objects.filter(pk=record["id"]).update(trust="confirmed")
    return record


def test_it_audits_a_decision_search_once_per_key(agent, tenant):
    record = _confirmed(agent, tenant, value="carrier alpha")
    first = _decision_search(agent, "search-1")
    again = _decision_search(agent, "search-1")
    assert first.status_code == again.status_code == 200
    assert again["Idempotent-Replayed"] == "true"
    assert again.json()["results"] == first.json()["results"]
    assert [hit["record"]["id"] for hit in again.json()["results"]] == [record["id"]]
    assert len(_decisions_audited(tenant)) == 1


def test_it_answers_422_for_a_search_key_reused_with_another_body(agent, tenant):
    _decision_search(agent, "search-2")
    problem = assert_problem(_decision_search(agent, "search-2", top_k=3), 422)
    assert "Idempotency-Key" in problem["detail"]
    assert len(_decisions_audited(tenant)) == 1


def test_it_keeps_no_content_of_a_search_and_replays_nothing_deleted_since(agent, tenant):
    secret = "carrier alpha-secret-4711"
    record = _confirmed(agent, tenant, value=secret)
    assert _decision_search(agent, "search-3").json()["results"]
    with tenant_scope(tenant.pk):
        stored = IdempotencyKey.objects.get(key="search-3")
    assert secret not in json.dumps(stored.response_body)
    assert stored.response_body == {"returned": [record["id"]]}
    delete_agent = make_agent(tenant, "read,delete", name="deleter")
    assert delete_agent.delete(f"{RECORDS}/{record['id']}").status_code == 200
    again = _decision_search(agent, "search-3")
    assert again["Idempotent-Replayed"] == "true"
    assert again.json()["results"] == []
    assert secret not in again.content.decode()


def test_it_never_replays_more_than_the_first_search_returned(agent, tenant):
    _confirmed(agent, tenant, value="carrier alpha", subject="user:1")
    first = _decision_search(agent, "search-4").json()["results"]
    _confirmed(agent, tenant, value="carrier beta", subject="user:2")
    again = _decision_search(agent, "search-4").json()["results"]
    assert [hit["record"]["id"] for hit in again] == [hit["record"]["id"] for hit in first]


def test_it_takes_an_idempotency_key_on_fact_checks(agent, tenant):
    record = agent.post(RECORDS, body()).json()
    check = {"facts": [{"id": record["id"], "version": 1}]}
    path = "/api/v1/facts/check"
    first = agent.post(path, check, headers={"Idempotency-Key": "check-1"})
    again = agent.post(path, check, headers={"Idempotency-Key": "check-1"})
    assert first.status_code == again.status_code == 200
    assert again["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()
    other = {"facts": [{"id": record["id"], "version": 2}]}
    assert_problem(agent.post(path, other, headers={"Idempotency-Key": "check-1"}), 422)


def test_a_retry_after_the_record_expired_replays_no_content(agent, tenant):
    """Until the expiry sweep replaces it with a tombstone, the stored response held the
    expired value, and a retry handed it back (found by the evaluation's canaries)."""
    sent = body(value="carrier_secret")
    first = _post(agent, sent, "key-expiring")
    with tenant_scope(tenant.pk):
        MemoryRecord.objects.filter(pk=first.json()["id"]).update(
            expires_at=timezone.now() - timedelta(minutes=1)
        )
    again = _post(agent, sent, "key-expiring")
    assert assert_problem(again, 410)["state"] == "expired"
    assert_conforms(again, RECORDS, "POST")
    assert again["Idempotent-Tombstone"] == "true"
    assert "carrier_secret" not in again.content.decode()
    assert _counts(tenant) == (1, 1)  # nothing written again


def test_a_retry_of_a_summary_of_an_expired_record_replays_no_text(agent, tenant):
    record = _post(agent, body(), "key-record").json()
    summary = {
        "text": "carrier_a noted",
        "sources": [{"type": "record", "id": record["id"]}],
        "reason": "r",
    }
    assert _post(agent, summary, "key-summary", path="/api/v1/summaries").status_code == 201
    with tenant_scope(tenant.pk):
        MemoryRecord.objects.filter(pk=record["id"]).update(
            expires_at=timezone.now() - timedelta(minutes=1)
        )
    again = _post(agent, summary, "key-summary", path="/api/v1/summaries")
    assert "carrier_a noted" not in again.content.decode()
    assert assert_problem(again, 410)["state"] == "expired"
    assert_conforms(again, "/api/v1/summaries", "POST")
