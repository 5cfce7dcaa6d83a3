"""The embedding pipeline: a transactional outbox, a relay, idempotent tasks."""

from __future__ import annotations

import json
from typing import Any

import pytest

from apps.derivations import embeddings as embeddings_module
from apps.derivations.models import Embedding, OutboxMessage, OutboxState
from apps.derivations.outbox import (
    EMBED_RECORD,
    outbox_relay,
    outbox_relay_tenant,
    record_embedding_enqueue,
)
from apps.derivations.tasks import MAX_RETRIES, embed_record
from apps.records.models import MemoryRecord
from apps.tenancy.context import tenant_scope
from memoryconsole.celery import TENANT_HEADER

from .support import SEARCH, drain, run_eagerly, write

pytestmark = pytest.mark.django_db


def outbox_rows(tenant: Any) -> list[OutboxMessage]:
    with tenant_scope(tenant.pk):
        return list(OutboxMessage.objects.order_by("created_at"))


def embeddings_of(tenant: Any, record_id: str) -> list[Embedding]:
    with tenant_scope(tenant.pk):
        return list(Embedding.objects.filter(record_id=record_id))


def test_it_queues_an_embedding_in_the_write_transaction_with_ids_only(agent, tenant):
    record = write(agent, value="very secret carrier", content="very secret carrier preference")
    [row] = outbox_rows(tenant)
    assert row.task_name == EMBED_RECORD
    assert row.state == OutboxState.PENDING
    assert row.payload == {"record_id": record["id"]}
    assert "secret" not in json.dumps(row.payload)
    assert embeddings_of(tenant, record["id"]) == []


def test_it_finds_a_record_by_text_at_once_and_by_vector_once_embedded(agent, tenant):
    record = write(agent, content="prefers the blue courier on weekdays")
    found = agent.post(SEARCH, {"query": "blue courier", "scope": {"domain": "commerce"}})
    assert found.status_code == 200, found.content
    hit = next(h for h in found.json()["results"] if h["record"]["id"] == record["id"])
    assert not hit["why"].get("vector")
    assert drain() == 1
    [embedding] = embeddings_of(tenant, record["id"])
    assert (embedding.model, embedding.dimension) == ("hashing-256", 256)
    found = agent.post(SEARCH, {"query": "blue courier", "scope": {"domain": "commerce"}})
    hit = next(h for h in found.json()["results"] if h["record"]["id"] == record["id"])
    assert hit["why"].get("vector")
    [row] = outbox_rows(tenant)
    assert row.state == OutboxState.DONE


def test_it_updates_the_same_row_when_a_task_runs_twice(agent, tenant):
    record = write(agent)
    drain()
    [row] = outbox_rows(tenant)
    run_eagerly(row)  # a redelivered message (worker killed after the commit, before the ack)
    assert len(embeddings_of(tenant, record["id"])) == 1


def test_it_does_nothing_for_a_record_deleted_before_the_task_runs(agent, tenant):
    record = write(agent)
    [row] = outbox_rows(tenant)
    with tenant_scope(tenant.pk):
        MemoryRecord.objects.filter(pk=record["id"]).update(supersedes=None)
    # The task for a vanished record (payload points nowhere) is a no-op, not an error.
    result = embed_record.apply(
        kwargs={"record_id": "00000000-0000-0000-0000-000000000000", "outbox_id": str(row.pk)},
        headers={TENANT_HEADER: str(tenant.pk)},
    )
    assert result.get() == "missing"
    with tenant_scope(tenant.pk):
        assert not Embedding.objects.exists()


def test_it_keeps_a_row_pending_when_publishing_fails_and_publishes_it_later(agent, tenant):
    """The relay dies between commit and publish: nothing is lost, the next relay sends it."""
    record = write(agent)

    def broken(message: OutboxMessage) -> None:
        raise ConnectionError("broker down")

    with pytest.raises(ConnectionError):
        outbox_relay(publish=broken)
    [row] = outbox_rows(tenant)
    assert row.state == OutboxState.PENDING
    assert drain() == 1
    assert len(embeddings_of(tenant, record["id"])) == 1


def test_it_relays_every_tenant_as_that_tenant(agent, tenant, other_agent, other_tenant):
    mine = write(agent)
    theirs = write(other_agent)
    sent: list[tuple[str, str]] = []

    def capture(message: OutboxMessage) -> None:
        sent.append((str(message.tenant_id), message.payload["record_id"]))
        run_eagerly(message)

    assert outbox_relay(publish=capture) == 2
    assert sorted(sent) == sorted(
        [(str(tenant.pk), mine["id"]), (str(other_tenant.pk), theirs["id"])]
    )
    assert len(embeddings_of(tenant, mine["id"])) == 1
    assert embeddings_of(tenant, theirs["id"]) == []  # RLS: the other tenant's row is theirs
    assert len(embeddings_of(other_tenant, theirs["id"])) == 1


def test_it_refuses_to_relay_from_inside_a_tenant_scope(tenant):
    with tenant_scope(tenant.pk), pytest.raises(RuntimeError):
        outbox_relay()


def test_it_marks_the_row_dead_after_the_last_retry(agent, tenant, monkeypatch):
    write(agent)

    def failing(record_id: Any) -> str:
        raise ValueError("embedder exploded")

    monkeypatch.setattr(embeddings_module, "record_embed", failing)
    with tenant_scope(tenant.pk):
        [row] = OutboxMessage.objects.all()
        outbox_relay_tenant(tenant.pk, publish=lambda m: None)
    embed_record.apply(
        kwargs={"record_id": row.payload["record_id"], "outbox_id": str(row.pk)},
        headers={TENANT_HEADER: str(tenant.pk)},
    )
    [row] = outbox_rows(tenant)
    assert row.state == OutboxState.DEAD
    assert row.attempts == MAX_RETRIES + 1
    assert "embedder exploded" in row.last_error


def test_it_queues_one_embedding_per_pending_record(agent, tenant):
    record = write(agent)
    with tenant_scope(tenant.pk):
        stored = MemoryRecord.objects.get(pk=record["id"])
        record_embedding_enqueue(stored)
        assert OutboxMessage.objects.count() == 1


def test_it_publishes_by_task_name_with_the_tenant_header_and_ids_only(agent, tenant, monkeypatch):
    from apps.derivations.outbox import publish_to_celery
    from memoryconsole.celery import app

    record = write(agent, content="very private words")
    sent: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(app, "send_task", lambda name, **options: sent.append((name, options)))
    assert outbox_relay(publish=publish_to_celery) == 1
    [(name, options)] = sent
    assert name == EMBED_RECORD
    assert options["headers"] == {TENANT_HEADER: str(tenant.pk)}
    assert options["kwargs"]["record_id"] == record["id"]
    assert "private" not in json.dumps(options)
    [row] = outbox_rows(tenant)
    assert row.state == OutboxState.PUBLISHED
