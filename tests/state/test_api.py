"""``/api/v1/runs`` and ``/api/v1/obligations`` as an agent sees them: every status code,
tenant isolation, the ``state`` action, and the audit trail."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.records.models import MemoryRecord, Trust
from apps.state.models import Episode
from apps.tenancy.context import tenant_scope
from tests.api.support import assert_problem
from tests.records.factories import body as record_body
from tests.records.support import audit_row_text

from .support import OBLIGATIONS, RUNS, audit_events, create_obligation, ok, open_run

pytestmark = pytest.mark.django_db


# --- runs -------------------------------------------------------------------------------------


def test_it_opens_a_run(agent, tenant):
    run = open_run(agent, task_id="order-1", owner="service:checkout")
    assert run["task_id"] == "order-1"
    assert run["owner"] == "service:checkout"
    assert run["state"] == "open"
    assert run["closed_at"] is None
    assert run["closed_by"] is None
    assert run["opened_by"]["id"] == str(agent.credential.pk)
    [event] = audit_events(tenant, "run.open")
    assert event.object_id == run["id"]


def test_it_names_the_bad_fields_of_a_run(agent):
    # An unknown field is named beside every other failure, all at once (apps.api.contract).
    response = agent.post(RUNS, {"owner": "alice", "extra": 1})
    assert set(assert_problem(response, 400)["errors"]) == {"extra", "task_id", "owner"}
    response = agent.post(RUNS, {"owner": "alice"})
    assert set(assert_problem(response, 400)["errors"]) == {"task_id", "owner"}


def test_it_requires_task_and_a_principal_as_owner(agent):
    body = assert_problem(agent.post(RUNS, {"owner": "alice"}), 400)
    assert set(body["errors"]) == {"task_id", "owner"}


def test_it_refuses_unknown_fields(agent):
    body = assert_problem(agent.post(RUNS, {"task_id": "t", "owner": "user:a", "tenant": "x"}), 400)
    assert set(body["errors"]) == {"tenant"}


def test_it_refuses_a_body_that_is_not_an_object(agent):
    assert_problem(agent.post(RUNS, [1, 2]), 400)


def test_it_reads_and_lists_runs_by_task(agent):
    first = open_run(agent, task_id="order-1")
    open_run(agent, task_id="order-2")
    assert ok(agent.get(f"{RUNS}/{first['id']}"))["id"] == first["id"]
    listing = ok(agent.get(RUNS, {"task_id": "order-1"}))
    assert [r["id"] for r in listing["results"]] == [first["id"]]
    assert len(ok(agent.get(RUNS, {"state": "open"}))["results"]) == 2
    assert_problem(agent.get(RUNS, {"state": "sideways"}), 400)


def test_it_answers_404_for_unknown_and_malformed_run_ids(agent):
    assert_problem(agent.get(f"{RUNS}/{uuid.uuid4()}"), 404)
    assert_problem(agent.get(f"{RUNS}/not-a-uuid"), 404)
    assert_problem(agent.post(f"{RUNS}/not-a-uuid/close"), 404)


# --- episodes ---------------------------------------------------------------------------------


def test_it_appends_episodes_in_order(agent, tenant):
    run = open_run(agent)
    first = ok(agent.post(f"{RUNS}/{run['id']}/episodes", {"role": "user", "content": "hi"}), 201)
    second = ok(
        agent.post(f"{RUNS}/{run['id']}/episodes", {"role": "tool", "content_ref": "s3://x/1"}),
        201,
    )
    assert (first["seq"], second["seq"]) == (1, 2)
    assert second["content_ref"] == "s3://x/1"
    listing = ok(agent.get(f"{RUNS}/{run['id']}/episodes"))
    assert [e["content"] for e in listing["results"]] == ["hi", ""]
    event = audit_events(tenant, "episode.append")[0]
    assert "hi" not in audit_row_text(event)


@pytest.mark.parametrize(
    "payload",
    [{"role": "tool"}, {"role": "tool", "content": "a", "content_ref": "b"}, {"content": "a"}],
)
def test_it_needs_a_role_and_exactly_one_of_content_and_ref(agent, payload):
    run = open_run(agent)
    body = assert_problem(agent.post(f"{RUNS}/{run['id']}/episodes", payload), 400)
    assert set(body["errors"]) <= {"role", "content"}


def test_it_refuses_episodes_on_a_closed_run(agent):
    run = open_run(agent)
    ok(agent.post(f"{RUNS}/{run['id']}/close"))
    body = assert_problem(
        agent.post(f"{RUNS}/{run['id']}/episodes", {"role": "tool", "content": "late"}), 409
    )
    assert body["type"].endswith("/run-closed")


# --- checkpoints ------------------------------------------------------------------------------


def _checkpoint(agent, run, step, state):
    return agent.post(f"{RUNS}/{run['id']}/checkpoints", {"step": step, "state": state})


def test_it_writes_checkpoints_forward_only(agent):
    run = open_run(agent)
    first = ok(_checkpoint(agent, run, 1, {"done": ["a"]}), 201)
    again = ok(_checkpoint(agent, run, 1, {"done": ["a"]}), 200)
    assert again["id"] == first["id"]
    differs = assert_problem(_checkpoint(agent, run, 1, {"done": ["b"]}), 409)
    assert differs["latest_step"] == 1
    ok(_checkpoint(agent, run, 3, {"done": ["a", "b", "c"]}), 201)
    behind = assert_problem(_checkpoint(agent, run, 2, {"done": ["a", "b"]}), 409)
    assert behind["latest_step"] == 3
    assert behind["type"].endswith("/checkpoint-conflict")
    # Even the very state step 1 was written with: the run is past it.
    assert_problem(_checkpoint(agent, run, 1, {"done": ["a"]}), 409)


def test_it_returns_the_latest_checkpoint(agent, tenant):
    run = open_run(agent)
    assert_problem(agent.get(f"{RUNS}/{run['id']}/checkpoints/latest"), 404)
    ok(_checkpoint(agent, run, 0, {"n": 0}), 201)
    ok(_checkpoint(agent, run, 5, {"n": 5}), 201)
    latest = ok(agent.get(f"{RUNS}/{run['id']}/checkpoints/latest"))
    assert (latest["step"], latest["state"]) == (5, {"n": 5})
    reads = [e for e in audit_events(tenant, "state.read") if e.object_id == run["id"]]
    assert [e.data["step"] for e in reads] == [None, 5]  # the 404 read is in the trail too


@pytest.mark.parametrize(
    "payload",
    [
        {"step": -1, "state": {}},
        {"step": 2**31, "state": {}},
        {"step": "one", "state": {}},
        {"step": 1.5, "state": {}},
        {"step": 1},
        {"step": 1, "state": None},
        {"step": 1, "state": {"text": "a\u0000b"}},
    ],
)
def test_it_names_bad_checkpoint_fields(agent, payload):
    run = open_run(agent)
    body = assert_problem(agent.post(f"{RUNS}/{run['id']}/checkpoints", payload), 400)
    # The field, or the part of its JSON value at fault (state.text).
    assert all(path.split(".")[0] in {"step", "state"} for path in body["errors"])


def test_it_refuses_checkpoints_on_a_closed_run(agent):
    run = open_run(agent)
    ok(agent.post(f"{RUNS}/{run['id']}/close"))
    assert_problem(_checkpoint(agent, run, 1, {}), 409)


# --- closing ----------------------------------------------------------------------------------


def _session_record(agent, run_id, **overrides):
    payload = record_body(
        retention={"basis": "session"}, source__run_id=run_id, sensitivity="internal", **overrides
    )
    return ok(agent.post("/api/v1/records", payload), 201)


def test_it_discards_episodes_on_close_and_audits_only_counts(agent, tenant):
    run = open_run(agent)
    for n in range(3):
        ok(
            agent.post(f"{RUNS}/{run['id']}/episodes", {"role": "tool", "content": f"secret-{n}"}),
            201,
        )
    closed = ok(agent.post(f"{RUNS}/{run['id']}/close"))
    assert closed["state"] == "closed"
    assert closed["episodes_discarded"] == 3
    assert closed["closed_by"]["id"] == str(agent.credential.pk)
    with tenant_scope(tenant.pk):
        assert Episode.objects.count() == 0
    assert ok(agent.get(f"{RUNS}/{run['id']}/episodes"))["results"] == []
    [event] = audit_events(tenant, "run.close")
    assert event.data["episodes_discarded"] == 3
    assert "secret" not in audit_row_text(event)


def test_it_closes_a_closed_run_without_a_second_effect(agent, tenant):
    run = open_run(agent)
    first = ok(agent.post(f"{RUNS}/{run['id']}/close"))
    second = ok(agent.post(f"{RUNS}/{run['id']}/close"))
    assert second["closed_at"] == first["closed_at"]
    assert len(audit_events(tenant, "run.close")) == 1


def test_it_expires_the_runs_session_records_on_close(agent, tenant):
    run = open_run(agent)
    other = open_run(agent, task_id="task-2")
    scratch = _session_record(agent, run["id"], subject="user:1")
    elsewhere = _session_record(agent, other["id"], subject="user:2")
    durable = ok(
        agent.post("/api/v1/records", record_body(subject="user:3", source__run_id=run["id"])),
        201,
    )
    closed = ok(agent.post(f"{RUNS}/{run['id']}/close"))
    assert closed["records_expired"] == 1
    assert_problem(agent.get(f"/api/v1/records/{scratch['id']}"), 404)
    ok(agent.get(f"/api/v1/records/{elsewhere['id']}"))
    ok(agent.get(f"/api/v1/records/{durable['id']}"))
    with tenant_scope(tenant.pk):
        expired = MemoryRecord.objects.get(pk=scratch["id"])
    assert expired.status == "expired"
    assert expired.expires_at <= timezone.now()
    [event] = audit_events(tenant, "run.close")
    assert event.data["records"] == [scratch["id"]]


def test_it_keeps_promoted_session_records_when_the_run_closes(agent, tenant):
    run = open_run(agent)
    promoted = _session_record(agent, run["id"])
    with tenant_scope(tenant.pk):
        MemoryRecord.objects.filter(pk=promoted["id"]).update(trust=Trust.CONFIRMED)
    assert ok(agent.post(f"{RUNS}/{run['id']}/close"))["records_expired"] == 0
    ok(agent.get(f"/api/v1/records/{promoted['id']}"))


def test_it_forgets_replayable_episode_responses_when_the_run_closes(agent):
    run = open_run(agent)
    path = f"{RUNS}/{run['id']}/episodes"
    headers = {"Idempotency-Key": "episode-1"}
    payload = {"role": "tool", "content": "card ending 4242"}
    ok(agent.post(path, payload, headers=headers), 201)
    ok(agent.post(f"{RUNS}/{run['id']}/close"))
    # The stored response (with the content) went with the episode; a retry gets a
    # content-free tombstone (a 410) and writes nothing to the closed run.
    replay = agent.post(path, payload, headers=headers)
    assert replay.status_code == 410
    assert replay["Idempotent-Tombstone"] == "true"
    assert "4242" not in replay.content.decode()


# --- obligations ------------------------------------------------------------------------------


def test_it_creates_an_obligation_once_per_key(agent, tenant):
    first = agent.post(
        OBLIGATIONS,
        {"task_id": "t", "kind": "charge", "key": "t:1", "payload": {"amount": 1}},
    )
    created = ok(first, 201)
    assert created["state"] == "pending"
    assert created["mismatched"] == []
    again = ok(agent.post(OBLIGATIONS, {"task_id": "t", "kind": "charge", "key": "t:1"}), 200)
    assert again["id"] == created["id"]
    assert again["mismatched"] == ["payload"]
    assert again["payload"] == {"amount": 1}
    assert len(audit_events(tenant, "obligation.create")) == 1


def test_it_names_unknown_dependencies(agent, other_agent):
    foreign = create_obligation(other_agent, key="theirs")
    missing = str(uuid.uuid4())
    response = agent.post(
        OBLIGATIONS,
        {"task_id": "t", "kind": "k", "key": "k1", "depends_on": [missing, foreign["id"]]},
    )
    body = assert_problem(response, 422)
    assert body["errors"]["depends_on"] == [
        f"No obligation {missing} in this tenant.",
        f"No obligation {foreign['id']} in this tenant.",
    ]
    assert_problem(agent.get(f"{OBLIGATIONS}/{foreign['id']}"), 404)


def test_it_names_malformed_obligation_fields(agent):
    response = agent.post(
        OBLIGATIONS,
        {"task_id": "t", "kind": "k", "key": "", "depends_on": ["nope"], "deadline": "soon"},
    )
    body = assert_problem(response, 400)
    assert set(body["errors"]) == {"key", "depends_on[0]", "deadline"}


@pytest.mark.parametrize("key", [" ", "\t\n", "\u3000"])
def test_it_refuses_an_obligation_key_of_only_whitespace(agent, tenant, key):
    response = agent.post(OBLIGATIONS, {"task_id": "t", "kind": "k", "key": key})
    body = assert_problem(response, 400)
    assert body["errors"] == {"key": ["Must not be only whitespace."]}
    assert audit_events(tenant, "obligation.create") == []


def test_it_keeps_an_obligation_keys_surrounding_whitespace(agent):
    created = ok(agent.post(OBLIGATIONS, {"task_id": "t", "kind": "k", "key": " t:1 "}), 201)
    assert created["key"] == " t:1 "


def test_it_refuses_a_deadline_without_a_zone(agent):
    response = agent.post(
        OBLIGATIONS, {"task_id": "t", "kind": "k", "key": "k", "deadline": "2030-01-01T00:00:00"}
    )
    assert set(assert_problem(response, 400)["errors"]) == {"deadline"}


def test_it_commits_exactly_once(agent, tenant):
    obligation = create_obligation(agent)
    path = f"{OBLIGATIONS}/{obligation['id']}/commit"
    won = ok(agent.post(path, {"result": {"charge": "ch_1"}}))
    assert won["state"] == "committed"
    assert won["result"] == {"charge": "ch_1"}
    assert won["committed_by"]["id"] == str(agent.credential.pk)
    lost = assert_problem(agent.post(path, {"result": {"charge": "ch_2"}}), 409)
    assert lost["type"].endswith("/already-committed")
    assert lost["result"] == {"charge": "ch_1"}
    assert lost["committed_at"] == won["committed_at"]
    assert ok(agent.get(f"{OBLIGATIONS}/{obligation['id']}"))["result"] == {"charge": "ch_1"}
    [commit] = audit_events(tenant, "obligation.commit")
    assert commit.digest
    assert "ch_1" not in audit_row_text(commit)
    [refused] = audit_events(tenant, "obligation.commit_refused")
    assert refused.data["refusal"] == "already_committed"


def test_it_refuses_to_commit_before_dependencies(agent):
    charge = create_obligation(agent, key="t:1:charge")
    email = create_obligation(agent, key="t:2:email", kind="email", depends_on=[charge["id"]])
    path = f"{OBLIGATIONS}/{email['id']}/commit"
    blocked = assert_problem(agent.post(path, {"result": None}), 409)
    assert blocked["type"].endswith("/dependencies-not-committed")
    assert blocked["pending_dependencies"] == [
        {"id": charge["id"], "key": "t:1:charge", "state": "pending"}
    ]
    assert charge["id"] in blocked["detail"]
    ok(agent.post(f"{OBLIGATIONS}/{charge['id']}/commit", {"result": {"ok": True}}))
    assert ok(agent.post(path, {"result": {"sent": True}}))["state"] == "committed"


def test_it_fails_and_cancels_pending_obligations(agent):
    charge = create_obligation(agent, key="t:1")
    email = create_obligation(agent, key="t:2", depends_on=[charge["id"]])
    failed = ok(
        agent.post(f"{OBLIGATIONS}/{charge['id']}/fail", {"reason": "card declined", "result": {}})
    )
    assert (failed["state"], failed["end_reason"]) == ("failed", "card declined")
    assert failed["ended_by"]["id"] == str(agent.credential.pk)
    refused = assert_problem(agent.post(f"{OBLIGATIONS}/{charge['id']}/commit", {}), 409)
    assert refused["type"].endswith("/obligation-not-pending")
    blocked = assert_problem(agent.post(f"{OBLIGATIONS}/{email['id']}/commit", {}), 409)
    assert blocked["pending_dependencies"][0]["state"] == "failed"
    assert ok(agent.post(f"{OBLIGATIONS}/{email['id']}/cancel", {}))["state"] == "cancelled"
    again = assert_problem(agent.post(f"{OBLIGATIONS}/{email['id']}/cancel", {}), 409)
    assert again["state"] == "cancelled"


def test_it_lists_obligations_by_task_state_and_deadline(agent, tenant):
    past = (timezone.now() - timedelta(hours=1)).isoformat()
    future = (timezone.now() + timedelta(hours=1)).isoformat()
    late = create_obligation(agent, key="a", task_id="t1", deadline=past)
    create_obligation(agent, key="b", task_id="t1", deadline=future)
    done = create_obligation(agent, key="c", task_id="t2", deadline=past)
    ok(agent.post(f"{OBLIGATIONS}/{done['id']}/commit", {}))

    def keys(**params):
        return [o["key"] for o in ok(agent.get(OBLIGATIONS, params))["results"]]

    assert keys(task_id="t1") == ["a", "b"]
    assert keys(state="pending") == ["a", "b"]
    assert keys(state="committed") == ["c"]
    assert keys(overdue="true") == ["a"]
    assert keys(overdue="false") == ["b", "c"]
    assert ok(agent.get(f"{OBLIGATIONS}/{late['id']}"))["overdue"] is True
    assert_problem(agent.get(OBLIGATIONS, {"state": "maybe"}), 400)
    assert_problem(agent.get(OBLIGATIONS, {"overdue": "often"}), 400)
    reads = [e.data for e in audit_events(tenant, "state.read") if e.data.get("list")]
    assert {"list": "obligations", "count": 1, "task_id": "", "state": "", "overdue": True} in reads


def test_it_replays_a_commit_with_the_same_idempotency_key(agent):
    obligation = create_obligation(agent)
    path = f"{OBLIGATIONS}/{obligation['id']}/commit"
    headers = {"Idempotency-Key": "commit-1"}
    first = ok(agent.post(path, {"result": 1}, headers=headers))
    replay = agent.post(path, {"result": 1}, headers=headers)
    assert replay.status_code == 200
    assert replay["Idempotent-Replayed"] == "true"
    assert replay.json() == first
    assert_problem(agent.post(path, {"result": 2}, headers=headers), 422)


# --- isolation and permissions ---------------------------------------------------------------


def _endpoints(run_id, obligation_id):
    return [
        ("get", f"{RUNS}/{run_id}", None),
        ("get", f"{RUNS}/{run_id}/episodes", None),
        ("post", f"{RUNS}/{run_id}/episodes", {"role": "tool", "content": "x"}),
        ("post", f"{RUNS}/{run_id}/checkpoints", {"step": 1, "state": {}}),
        ("get", f"{RUNS}/{run_id}/checkpoints/latest", None),
        ("post", f"{RUNS}/{run_id}/close", None),
        ("get", f"{OBLIGATIONS}/{obligation_id}", None),
        ("post", f"{OBLIGATIONS}/{obligation_id}/commit", {"result": 1}),
        ("post", f"{OBLIGATIONS}/{obligation_id}/fail", {}),
        ("post", f"{OBLIGATIONS}/{obligation_id}/cancel", {}),
    ]


def test_it_hides_another_tenants_state(agent, other_agent, other_tenant):
    run = open_run(other_agent)
    ok(_checkpoint(other_agent, run, 1, {"secret": True}), 201)
    obligation = create_obligation(other_agent)
    for method, path, payload in _endpoints(run["id"], obligation["id"]):
        response = (
            getattr(agent, method)(path, payload) if payload else getattr(agent, method)(path)
        )
        assert_problem(response, 404)
    assert ok(agent.get(RUNS))["results"] == []
    assert ok(agent.get(OBLIGATIONS))["results"] == []
    # Their obligation key is theirs: the same key here is a different obligation.
    mine = create_obligation(agent)
    assert mine["id"] != obligation["id"]
    with tenant_scope(other_tenant.pk):
        assert ok(other_agent.get(f"{RUNS}/{run['id']}"))["state"] == "open"


def test_it_requires_the_state_action(agent, stateless_agent):
    run = open_run(agent)
    obligation = create_obligation(agent)
    calls = [
        *_endpoints(run["id"], obligation["id"]),
        ("get", RUNS, None),
        ("post", RUNS, {"task_id": "t", "owner": "user:a"}),
        ("get", OBLIGATIONS, None),
        ("post", OBLIGATIONS, {"task_id": "t", "kind": "k", "key": "k9"}),
    ]
    for method, path, payload in calls:
        client = getattr(stateless_agent, method)
        response = client(path, payload) if payload else client(path)
        assert_problem(response, 403)


def test_it_requires_a_credential(client):
    assert_problem(client.get(RUNS), 401)
    assert_problem(client.post(OBLIGATIONS, {}, content_type="application/json"), 401)


def test_it_documents_the_state_api(client):
    schema = client.get("/api/schema/", headers={"Accept": "application/json"}).json()
    commit = schema["paths"]["/api/v1/obligations/{obligation_id}/commit"]["post"]
    assert {"200", "400", "401", "403", "404", "409"} <= set(commit["responses"])
    assert any(p["name"] == "Idempotency-Key" for p in commit["parameters"])
    create = schema["paths"]["/api/v1/obligations"]["post"]
    assert {"200", "201"} <= set(create["responses"])
    latest = schema["paths"]["/api/v1/runs/{run_id}/checkpoints/latest"]["get"]
    assert "404" in latest["responses"]
    assert json.dumps(schema)  # serialisable
