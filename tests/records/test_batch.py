"""``POST /api/v1/records/batch``: up to 500 writes, each validated by the write contract and
answered on its own, in order; one ``Idempotency-Key`` for the batch."""

from __future__ import annotations

from typing import Any

import pytest

from apps.api.models import IdempotencyKey
from apps.audit.models import DeletionReceipt
from apps.derivations.models import Embedding
from apps.governance.verification import erasure_verify
from apps.tenancy.context import tenant_scope
from apps.tenancy.models import Tenant
from apps.work.models import OutboxMessage
from tests.api.contract import assert_conforms
from tests.conftest import make_agent

from .factories import body
from .support import audit_events, fact_values, row_counts

pytestmark = pytest.mark.django_db

BATCH = "/api/v1/records/batch"


def batch(agent: Any, items: list[Any], key: str | None = None) -> Any:
    headers = {"Idempotency-Key": key} if key else None
    return agent.post(BATCH, {"items": items}, headers=headers)


def test_it_writes_the_valid_items_and_answers_each_in_order(
    agent, other_agent, tenant, other_tenant
):
    # Another tenant's open run, and the same subject and key written there.
    rival_run = other_agent.post(
        "/api/v1/runs", {"task_id": "t-1", "owner": "service:x", "subject": "user:8812"}
    ).json()["id"]
    other_agent.post("/api/v1/records", body(value="rival"))
    items = [
        body(value="carrier_a"),
        body(owner=None, trust="confirmed"),  # a missing field and one the server sets
        body(value="carrier_a"),  # the first again, same source: unchanged
        body(value="carrier_b"),  # a contradiction: a contender and a conflict
        body(key="notes.long", value="x" * 70_000),  # over the value's 64 KiB
        body(key="session.note", retention={"basis": "session"}, source__run_id=rival_run),
        "not an object",
    ]

    # A model that embeds at write: a batch leaves its embeddings to the worker instead.
    Tenant.objects.filter(pk=tenant.pk).update(embedding_model="e5-small")
    response = batch(agent, items)

    assert response.status_code == 200, response.content[:800]
    answer = assert_conforms(response, BATCH, "POST")
    statuses = [(item["index"], item["status"]) for item in answer["items"]]
    assert statuses == [(0, 201), (1, 400), (2, 200), (3, 201), (4, 413), (5, 422), (6, 400)]
    assert (answer["succeeded"], answer["failed"]) == (3, 4)
    first, _, again, contender = (item.get("record") for item in answer["items"][:4])
    assert (first["outcome"], again["outcome"], again["id"]) == (
        "created",
        "unchanged",
        first["id"],
    )
    assert contender["outcome"] == "conflict"
    assert contender["conflict"]
    # Each refusal is the problem POST /records answers, naming fields within its item.
    refused = answer["items"][1]["error"]
    assert refused["status"] == 400
    assert {"owner", "trust"} <= set(refused["errors"])
    assert "value" in answer["items"][4]["error"]["errors"]
    assert "source.run_id" in answer["items"][5]["error"]["errors"]
    assert answer["items"][6]["error"]["errors"] == {"body": ["Must be a JSON object."]}
    # Stored: one fact, two versions; the refused items stored nothing and were audited.
    assert row_counts(tenant) == {"records": 2, "facts": 1, "observations": 2}
    assert fact_values(agent)["shipping.preference"]["value"] == "carrier_a"
    with tenant_scope(tenant.pk):
        assert not Embedding.objects.exists()
        queued = set(OutboxMessage.objects.values_list("object_id", flat=True))
    assert {str(pk) for pk in queued} == {first["id"], contender["id"]}
    rejected = audit_events(tenant, "record.write_rejected")
    assert sorted(e.data["batch_index"] for e in rejected) == [1, 4, 5, 6]
    # The other tenant's run and fact are untouched: nothing of this batch reached them.
    assert row_counts(other_tenant) == {"records": 1, "facts": 1, "observations": 1}
    assert fact_values(other_agent)["shipping.preference"]["value"] == "rival"


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"items": []}, "Give 1 to 500 items."),
        ({"items": [body()] * 501}, "At most 500 items per batch"),
        ({"items": body()}, "A list of write bodies"),
        ({}, "This field is required."),
    ],
    ids=["empty", "over-500", "not-a-list", "missing"],
)
def test_it_refuses_a_batch_outside_its_limits_whole(agent, tenant, payload, message):
    response = agent.post(BATCH, payload, headers={"Idempotency-Key": "k-limits"})

    assert response.status_code == 400
    assert response["Content-Type"] == "application/problem+json"
    assert message in response.json()["errors"]["items"][0]
    assert row_counts(tenant)["records"] == 0
    with tenant_scope(tenant.pk):
        assert not IdempotencyKey.objects.exists()


def test_it_needs_the_write_action(tenant):
    reader = make_agent(tenant, "read", name="reader")

    response = batch(reader, [body()])

    assert response.status_code == 403
    assert row_counts(tenant)["records"] == 0


def test_a_retry_replays_each_item_without_content_gone_since(tenant):
    agent = make_agent(tenant, "read,write,delete")
    items = [body(value="carrier_a"), body(subject="user:2", value="b"), body(owner=None)]
    first = batch(agent, items, key="batch-1")
    assert first.status_code == 200
    events = len(audit_events(tenant))

    replay = batch(agent, items, key="batch-1")

    assert replay.status_code == 200
    assert replay["Idempotent-Replayed"] == "true"
    assert replay.json() == first.json()
    assert len(audit_events(tenant)) == events  # no second effect, no second audit
    assert batch(agent, items[:2], key="batch-1").status_code == 422  # another body

    # The key keeps ids and statuses, not the records: a deleted one is not shown again.
    gone = first.json()["items"][1]["record"]["id"]
    receipt = agent.delete(f"/api/v1/records/{gone}")
    assert receipt.status_code == 200
    with tenant_scope(tenant.pk):
        (stored,) = IdempotencyKey.objects.all()
        assert "carrier_a" not in str(stored.response_body)
        # Naming the deleted id beside statuses is no residue, as a search's memo is not.
        verified = erasure_verify(DeletionReceipt.objects.get(pk=receipt.json()["id"]))
        assert verified.residues == []

    after = assert_conforms(batch(agent, items, key="batch-1"), BATCH, "POST")["items"]

    assert [item["status"] for item in after] == [201, 410, 400]
    assert after[0] == first.json()["items"][0]
    assert after[1]["error"]["id"] == gone
    assert (after[1]["error"]["state"], after[1]["error"]["first_status"]) == ("deleted", 201)
    assert row_counts(tenant)["records"] == 1
