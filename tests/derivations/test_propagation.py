"""Deleting a record reaches everything derived from it, in the same transaction."""

from __future__ import annotations

import json
from typing import Any

import pytest

from apps.api.models import IdempotencyKey
from apps.audit.models import AuditEvent, DeletionReceipt
from apps.derivations.embedders import get_embedder
from apps.derivations.models import Embedding, Summary
from apps.records.purge import records_compact_expired
from apps.tenancy.context import tenant_scope
from apps.work.models import OutboxMessage
from tests.records.support import expire

from .support import RECORDS, SEARCH, SUMMARIES, drain, summarise, write

pytestmark = pytest.mark.django_db

SECRET = "zanzibar courier with the violet van"


def three_versions(agent: Any) -> list[dict[str, Any]]:
    """A fact with three versions: the first, a conflicting second, a conflicting third."""
    first = write(agent, value="v1", content=f"{SECRET} one")
    second = write(agent, value="v2", content=f"{SECRET} two", source__ref="interaction:2")
    third = write(agent, value="v3", content=f"{SECRET} three", source__ref="interaction:3")
    return [first, second, third]


def test_it_removes_every_trace_of_a_deleted_record(admin_agent, tenant):
    versions = three_versions(admin_agent)
    ids = [v["id"] for v in versions]
    summaries = []
    for i in range(10):
        response = summarise(admin_agent, [ids[i % 3]], text=f"{SECRET} summary {i}")
        assert response.status_code == 201, response.content
        summaries.append(response.json()["id"])
    drain()
    with tenant_scope(tenant.pk):
        assert Embedding.objects.count() == 13
        original_vector = [float(x) for x in Embedding.objects.get(record_id=ids[0]).vector]

    # a stored idempotent response for a write of this fact
    keyed = admin_agent.post(
        RECORDS,
        {**_body(value="v4", content=f"{SECRET} four", ref="interaction:4")},
        headers={"Idempotency-Key": "k-1"},
    )
    assert keyed.status_code == 201
    ids.append(keyed.json()["id"])

    response = admin_agent.delete(f"{RECORDS}/{ids[0]}")
    assert response.status_code == 200, response.content
    receipt = response.json()
    assert sorted(receipt["records"]) == sorted(ids)
    assert receipt["counts"]["embeddings"] == 13
    assert receipt["counts"]["summaries_invalidated"] == 10
    assert SECRET not in json.dumps(receipt)

    for rid in ids:
        assert admin_agent.get(f"{RECORDS}/{rid}").status_code == 404
    listing = admin_agent.get(RECORDS).json()
    assert SECRET not in json.dumps(listing)
    facts = admin_agent.get("/api/v1/facts", {"subject": "user:8812"}).json()
    assert SECRET not in json.dumps(facts)
    by_text = admin_agent.post(
        SEARCH, {"query": "zanzibar violet", "scope": {"domain": "commerce"}}
    )
    assert by_text.status_code == 200
    assert by_text.json()["results"] == []
    by_vector = admin_agent.post(
        SEARCH, {"vector": original_vector, "scope": {"domain": "commerce"}}
    )
    assert by_vector.status_code == 200, by_vector.content
    assert by_vector.json()["results"] == []

    with tenant_scope(tenant.pk):
        delete_event = AuditEvent.objects.get(action="record.delete")
        assert not Embedding.objects.exists()
        assert not OutboxMessage.objects.filter(object_id__in=ids + summaries).exists()
        assert not IdempotencyKey.objects.filter(key="k-1", tombstone=False).exists()
        for summary in Summary.objects.all():
            assert summary.valid is False
            assert summary.invalidated_by == delete_event.pk
            assert SECRET not in summary.text
        for event in AuditEvent.objects.all():
            assert SECRET not in json.dumps(event.data)
            assert "zanzibar" not in json.dumps(event.data)
        assert DeletionReceipt.objects.filter(pk=receipt["id"]).exists()

    shown = admin_agent.get(f"{SUMMARIES}/{summaries[0]}")
    assert shown.status_code == 200
    body = shown.json()
    assert body["valid"] is False
    assert body["text"] is None
    assert body["invalidated"]["by_event"] == str(delete_event.pk)
    assert body["embeddings"] == []


def _body(*, value: str, content: str, ref: str) -> dict[str, Any]:
    from tests.records.factories import body

    return body(value=value, content=content, source__ref=ref)


def test_it_changes_nothing_when_another_tenant_deletes(admin_agent, tenant, other_agent):
    record = write(admin_agent)
    summary = summarise(admin_agent, [record["id"]]).json()
    drain()
    assert other_agent.delete(f"{RECORDS}/{record['id']}").status_code == 404
    assert other_agent.get(f"{SUMMARIES}/{summary['id']}").status_code == 404
    with tenant_scope(tenant.pk):
        assert Embedding.objects.count() == 2
        assert Summary.objects.get().valid is True


def test_it_propagates_expiry_compaction(admin_agent, tenant):
    record = write(admin_agent)
    summary = summarise(admin_agent, [record["id"]]).json()
    drain()
    expire(tenant, record["id"])
    with tenant_scope(tenant.pk):
        assert records_compact_expired() == 1
        stored = Summary.objects.get(pk=summary["id"])
        assert not stored.valid
        assert not Embedding.objects.exists()
        event = AuditEvent.objects.get(action="record.delete")
        assert stored.invalidated_by == event.pk


def test_it_drops_queued_work_for_a_deleted_record(admin_agent, tenant):
    record = write(admin_agent)
    admin_agent.delete(f"{RECORDS}/{record['id']}")
    with tenant_scope(tenant.pk):
        assert not OutboxMessage.objects.exists()
    assert drain() == 0


def test_an_embedder_vector_of_a_deleted_record_is_not_searchable(admin_agent, tenant):
    record = write(admin_agent, content=SECRET)
    drain()
    vector = [float(x) for x in get_embedder("hashing-256").embed([SECRET])[0]]
    admin_agent.delete(f"{RECORDS}/{record['id']}")
    found = admin_agent.post(SEARCH, {"vector": vector, "scope": {"domain": "commerce"}})
    assert found.json()["results"] == []
