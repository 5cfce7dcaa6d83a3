"""The outbox: work written in the transaction of the change that wants it, a relay that
wakes each tenant's worker, retries with backoff, and wake-ups coalesced per tenant."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from django.utils import timezone

from apps.derivations.embedders import HashingEmbedder
from apps.derivations.models import Embedding
from apps.records import signals as records_signals
from apps.records.models import MemoryRecord
from apps.tenancy.context import tenant_scope
from apps.tenancy.models import Tenant
from apps.tenancy.tasks import TENANT_HEADER
from apps.work.models import OutboxMessage, OutboxState
from apps.work.outbox import (
    EMBED_RECORD,
    EMBED_WAKEUP,
    MAX_RETRIES,
    outbox_relay,
    record_embedding_enqueue,
)
from apps.work.selectors import background_work
from tests.derivations.support import drain, wake_eagerly, write

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


@pytest.mark.parametrize("model", ["hashing-256", "e5-small"])
def test_a_write_with_no_app_to_embed_it_commits_with_its_embedding_queued(
    agent, tenant, monkeypatch, model
):
    """The write queues its version's embedding itself: with no receiver of
    ``records.embed_record`` (not even for a model that embeds at write), the version is
    stored and its row waits for the worker."""
    Tenant.objects.filter(pk=tenant.pk).update(embedding_model=model)
    monkeypatch.setattr(records_signals.embed_record, "receivers", [])
    record = write(agent)
    [row] = outbox_rows(tenant)
    assert (row.task_name, row.object_id, row.state) == (
        EMBED_RECORD,
        uuid.UUID(record["id"]),
        OutboxState.PENDING,
    )
    with tenant_scope(tenant.pk):
        assert MemoryRecord.objects.filter(pk=record["id"]).exists()
    assert embeddings_of(tenant, record["id"]) == []


def test_a_write_on_a_model_that_embeds_at_write_queues_nothing(agent, tenant):
    """With the derivations app connected (the product), e5-small embeds inside the write."""
    Tenant.objects.filter(pk=tenant.pk).update(embedding_model="e5-small")
    record = write(agent)
    assert outbox_rows(tenant) == []
    [embedding] = embeddings_of(tenant, record["id"])
    assert embedding.model == "e5-small"


def test_it_keeps_a_row_pending_when_the_wake_up_fails_and_relays_it_later(agent, tenant):
    """The relay cannot reach the broker: nothing is lost, the next pass wakes the tenant."""
    record = write(agent)

    def broken(tenant_id: Any) -> None:
        raise ConnectionError("broker down")

    with pytest.raises(ConnectionError):
        outbox_relay(wake=broken)
    [row] = outbox_rows(tenant)
    assert row.state == OutboxState.PENDING
    assert drain() == 1
    assert len(embeddings_of(tenant, record["id"])) == 1


def test_it_wakes_every_tenant_as_that_tenant(agent, tenant, other_agent, other_tenant):
    mine = [write(agent, key=f"k.{n}") for n in range(3)]
    theirs = write(other_agent)
    woken: list[str] = []

    def capture(tenant_id: Any) -> None:
        woken.append(str(tenant_id))
        wake_eagerly(tenant_id)

    assert outbox_relay(wake=capture) == 4
    # One wake-up per tenant, not one message per record.
    assert sorted(woken) == sorted([str(tenant.pk), str(other_tenant.pk)])
    assert all(len(embeddings_of(tenant, record["id"])) == 1 for record in mine)
    assert embeddings_of(tenant, theirs["id"]) == []  # RLS: the other tenant's row is theirs
    assert len(embeddings_of(other_tenant, theirs["id"])) == 1


def test_it_refuses_to_relay_from_inside_a_tenant_scope(tenant):
    with tenant_scope(tenant.pk), pytest.raises(RuntimeError):
        outbox_relay()


def test_it_backs_off_after_a_failure_and_marks_the_row_dead_after_the_last_retry(
    agent, tenant, monkeypatch
):
    write(agent)

    def failing(self: Any, texts: Any) -> Any:
        raise ValueError("embedder exploded")

    monkeypatch.setattr(HashingEmbedder, "embed", failing)
    for attempt in range(1, MAX_RETRIES + 2):
        drain()
        [row] = outbox_rows(tenant)
        assert row.attempts == attempt
        assert "embedder exploded" in row.last_error
        if attempt <= MAX_RETRIES:
            assert row.state == OutboxState.PENDING
            assert row.available_at > timezone.now()  # not taken again before its backoff
            assert drain() == 0
            with tenant_scope(tenant.pk):  # the backoff has passed
                OutboxMessage.objects.filter(pk=row.pk).update(available_at=timezone.now())
    assert row.state == OutboxState.DEAD
    assert background_work().dead == 1


def test_it_queues_one_embedding_per_pending_record(agent, tenant):
    record = write(agent)
    with tenant_scope(tenant.pk):
        stored = MemoryRecord.objects.get(pk=record["id"])
        record_embedding_enqueue(stored)
        assert OutboxMessage.objects.count() == 1


def test_it_wakes_the_tenant_with_its_header_and_no_arguments(agent, tenant, monkeypatch):
    from memoryconsole.celery import app

    write(agent, content="very private words")
    write(agent, key="other.key", content="more private words")
    sent: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(app, "send_task", lambda name, **options: sent.append((name, options)))
    assert outbox_relay() == 2
    [(name, options)] = sent
    assert name == EMBED_WAKEUP
    assert options == {"headers": {TENANT_HEADER: str(tenant.pk)}}
    assert {row.state for row in outbox_rows(tenant)} == {OutboxState.PUBLISHED}
    assert outbox_relay() == 0  # woken already: not again before the redelivery delay


class ManualTime:
    """A clock that moves only when told, and delayed calls run only when told."""

    def __init__(self) -> None:
        self.now = 0.0
        self.scheduled: list[tuple[float, Any]] = []

    def later(self, delay: float, call: Any) -> None:
        self.scheduled.append((self.now + delay, call))

    def advance(self, seconds: float) -> None:
        self.now += seconds
        due = [call for at, call in self.scheduled if at <= self.now]
        self.scheduled = [(at, call) for at, call in self.scheduled if at > self.now]
        for call in due:
            call()


def test_a_burst_of_writes_sends_two_wake_ups_not_one_per_record(
    agent, tenant, settings, monkeypatch, django_capture_on_commit_callbacks
):
    """With on-commit publishing (Redis), each commit asks for a wake-up; the coalescer sends
    the first at once and one more after the burst, whatever the number of writes."""
    from apps.work import outbox

    sent: list[str] = []
    clock = ManualTime()
    coalescer = outbox.WakeupCoalescer(0.2, sent.append, clock=lambda: clock.now, later=clock.later)
    monkeypatch.setattr(outbox, "_coalescer", coalescer)
    settings.OUTBOX_RELAY_ON_COMMIT = True
    for n in range(10):
        with django_capture_on_commit_callbacks(execute=True):
            write(agent, key=f"burst.{n}")
    assert sent == [str(tenant.pk)]  # the first commit's, at once
    clock.advance(0.2)
    assert sent == [str(tenant.pk)] * 2  # one more, after the last commit of the burst
    clock.advance(10)
    assert len(sent) == 2
    with tenant_scope(tenant.pk):
        assert OutboxMessage.objects.filter(state=OutboxState.PENDING).count() == 10


def test_the_coalescer_sends_after_every_request_and_keeps_tenants_apart():
    from apps.work.outbox import WakeupCoalescer

    sent: list[str] = []
    clock = ManualTime()
    coalescer = WakeupCoalescer(1.0, sent.append, clock=lambda: clock.now, later=clock.later)
    coalescer.request("a")
    coalescer.request("b")
    assert sent == ["a", "b"]  # a quiet tenant's first request: at once, each tenant apart
    clock.advance(0.5)
    coalescer.request("a")
    coalescer.request("a")
    assert sent == ["a", "b"]  # within a's window: joined into one send at its end
    clock.advance(0.5)
    assert sent == ["a", "b", "a"]
    clock.advance(0.1)
    coalescer.request("a")  # after a send, inside the new window: waits for its end
    assert sent == ["a", "b", "a"]
    clock.advance(0.9)
    assert sent == ["a", "b", "a", "a"]
    clock.advance(5)
    coalescer.request("b")  # long quiet: at once again
    assert sent == ["a", "b", "a", "a", "b"]
