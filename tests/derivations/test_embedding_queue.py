"""A version's embedding from its queued row: found by text at once and by meaning once the
worker embedded it, idempotent, and nothing written for a version that is gone."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from apps.derivations.models import Embedding
from apps.records.models import MemoryRecord
from apps.tenancy.context import tenant_scope
from apps.work.models import OutboxMessage, OutboxState
from apps.work.outbox import record_embedding_enqueue
from tests.records.factories import body

from .support import SEARCH, drain, write

pytestmark = pytest.mark.django_db


def outbox_rows(tenant: Any) -> list[OutboxMessage]:
    with tenant_scope(tenant.pk):
        return list(OutboxMessage.objects.order_by("created_at"))


def embeddings_of(tenant: Any, record_id: str) -> list[Embedding]:
    with tenant_scope(tenant.pk):
        return list(Embedding.objects.filter(record_id=record_id))


def test_it_finds_a_record_by_text_at_once_and_by_vector_once_embedded(agent, tenant):
    record = write(agent, content="prefers the blue courier on weekdays")
    found = agent.post(SEARCH, {"query": "blue courier", "scope": body()["scope"]})
    assert found.status_code == 200, found.content
    hit = next(h for h in found.json()["results"] if h["record"]["id"] == record["id"])
    assert not hit["why"].get("vector")
    assert drain() == 1
    [embedding] = embeddings_of(tenant, record["id"])
    assert (embedding.model, embedding.dimension) == ("hashing-256", 256)
    found = agent.post(SEARCH, {"query": "blue courier", "scope": body()["scope"]})
    hit = next(h for h in found.json()["results"] if h["record"]["id"] == record["id"])
    assert hit["why"].get("vector")
    [row] = outbox_rows(tenant)
    assert row.state == OutboxState.DONE


def test_it_keeps_the_same_vector_when_the_same_record_is_queued_again(agent, tenant):
    record = write(agent)
    drain()
    [first] = embeddings_of(tenant, record["id"])
    with tenant_scope(tenant.pk):
        # A second row for the same version (a redelivery, a re-queue): nothing written again.
        record_embedding_enqueue(MemoryRecord.objects.get(pk=record["id"]))
    assert drain() == 1
    [again] = embeddings_of(tenant, record["id"])
    assert (again.pk, again.created_at) == (first.pk, first.created_at)
    assert {row.state for row in outbox_rows(tenant)} == {OutboxState.DONE}


def test_it_finishes_a_row_whose_record_is_gone_and_writes_nothing(agent, tenant):
    write(agent)
    [row] = outbox_rows(tenant)
    with tenant_scope(tenant.pk):
        # A row pointing at no record (its record went by a path that left the row).
        OutboxMessage.objects.filter(pk=row.pk).update(object_id=uuid.UUID(int=0))
    assert drain() == 1
    [row] = outbox_rows(tenant)
    assert row.state == OutboxState.DONE
    with tenant_scope(tenant.pk):
        assert not Embedding.objects.exists()
