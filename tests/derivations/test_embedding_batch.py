"""The embedding drain: queued embeddings claimed in batches, one embedder call per batch.

Each batch is one transaction: its outbox rows claimed ``FOR UPDATE SKIP LOCKED``, its sources
locked, one embedder call, the vectors written in bulk and the rows marked done. The tests
below run two transactions against each other for real (``transaction=True``: each thread has
its own connection and commits), so the interleavings they name actually happen.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.db import connection, connections

from apps.core.actors import Actor
from apps.derivations import embeddings as embeddings_module
from apps.derivations.embedders import HashingEmbedder
from apps.derivations.embeddings import embeddings_drain
from apps.derivations.models import Embedding
from apps.records.models import MemoryRecord
from apps.records.purge import record_delete
from apps.tenancy.context import tenant_scope
from apps.tenancy.models import Tenant
from apps.tenancy.tasks import TENANT_HEADER
from apps.work.models import OutboxMessage, OutboxState
from apps.work.outbox import outbox_relay, record_embedding_enqueue
from apps.work.selectors import background_work
from memoryconsole.celery import app
from tests.processes import wait_ready

from .support import drain, summarise, wake_eagerly, write

pytestmark = pytest.mark.django_db


@pytest.fixture
def embed_calls(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Every call of the hashing embedder, with the texts it was given (thread-safe)."""
    calls: list[list[str]] = []
    lock = threading.Lock()
    original = HashingEmbedder.embed

    def spying(self: HashingEmbedder, texts: Any) -> Any:
        with lock:
            calls.append(list(texts))
        return original(self, texts)

    monkeypatch.setattr(HashingEmbedder, "embed", spying)
    return calls


def vectors(tenant: Tenant, **lookup: Any) -> list[Embedding]:
    with tenant_scope(tenant.pk):
        return list(Embedding.objects.filter(**lookup))


def rows(tenant: Tenant) -> list[OutboxMessage]:
    with tenant_scope(tenant.pk):
        return list(OutboxMessage.objects.all())


def test_a_batch_embeds_many_records_and_a_summary_in_one_embedder_call(
    admin_agent, tenant, embed_calls
):
    records = [write(admin_agent, key=f"note.{n}", content=f"note number {n}") for n in range(30)]
    summary = summarise(admin_agent, [records[0]["id"]], text="a summary of note zero")
    assert summary.status_code == 201, summary.content
    assert background_work().waiting == 31
    assert drain() == 31
    assert len(embed_calls) == 1
    assert sorted(embed_calls[0]) == sorted(
        [f"note number {n}" for n in range(30)] + ["a summary of note zero"]
    )
    for record in records:
        [vector] = vectors(tenant, record_id=record["id"])
        assert (vector.model, vector.dimension) == ("hashing-256", 256)
    assert len(vectors(tenant, summary_id=summary.json()["id"])) == 1
    assert {row.state for row in rows(tenant)} == {OutboxState.DONE}
    work = background_work()
    assert (work.waiting, work.oldest_waiting_seconds, work.done_last_minute) == (0, None, 31)


def test_a_drain_takes_only_its_own_tenants_rows(agent, tenant, other_agent, other_tenant):
    mine = write(agent)
    theirs = write(other_agent)
    outcome = embeddings_drain(tenant.pk)
    assert (outcome.claimed, outcome.embedded) == (1, 1)
    assert len(vectors(tenant, record_id=mine["id"])) == 1
    assert vectors(other_tenant) == []
    assert [row.state for row in rows(other_tenant)] == [OutboxState.PENDING]
    # A wake-up with no tenant sees no tenant's rows (fail-closed).
    assert app.tasks["derivations.embed_pending"].apply().get() == "no tenant"
    assert [row.state for row in rows(other_tenant)] == [OutboxState.PENDING]
    wake_eagerly(other_tenant.pk)
    [vector] = vectors(other_tenant, record_id=theirs["id"])
    assert vector.tenant_id == other_tenant.pk


def test_a_failing_source_fails_alone_after_its_batch_failed(agent, tenant, monkeypatch):
    good = [write(agent, key=f"good.{n}", content=f"fine text {n}") for n in range(3)]
    bad = write(agent, key="bad", content="poison text")
    original = HashingEmbedder.embed

    def picky(self: HashingEmbedder, texts: Any) -> Any:
        if any("poison" in text for text in texts):
            raise ValueError("cannot embed this")
        return original(self, texts)

    monkeypatch.setattr(HashingEmbedder, "embed", picky)
    first = embeddings_drain(tenant.pk)
    assert first.failed == 4  # the whole batch rolled back, each row counted once
    with tenant_scope(tenant.pk):
        assert not Embedding.objects.exists()
        OutboxMessage.objects.update(available_at=None)  # their backoff has passed
    second = embeddings_drain(tenant.pk)
    assert (second.embedded, second.failed) == (3, 1)  # retried one per batch
    for record in good:
        assert len(vectors(tenant, record_id=record["id"])) == 1
    with tenant_scope(tenant.pk):
        poisoned = OutboxMessage.objects.get(object_id=bad["id"])
    assert (poisoned.state, poisoned.attempts) == (OutboxState.PENDING, 2)


def test_a_client_vector_tenant_keeps_its_vectors_and_computes_none(
    admin_agent, tenant, embed_calls
):
    Tenant.objects.filter(pk=tenant.pk).update(embedding_model="client-4")
    record = write(admin_agent, vector=[0.5, -0.25, 0.125, 1.0])
    [sent] = vectors(tenant, record_id=record["id"])
    assert drain() == 1
    assert embed_calls == []
    [kept] = vectors(tenant, record_id=record["id"])
    assert (kept.pk, kept.model, list(kept.vector)) == (sent.pk, "client-4", list(sent.vector))
    assert [row.state for row in rows(tenant)] == [OutboxState.DONE]


def test_a_vector_made_from_another_text_is_replaced(agent, tenant, embed_calls):
    record = write(agent, content="the current text")
    drain()
    with tenant_scope(tenant.pk):
        Embedding.objects.filter(record_id=record["id"]).update(content_digest="an older text")
        record_embedding_enqueue(MemoryRecord.objects.get(pk=record["id"]))
    assert drain() == 1
    assert embed_calls[-1] == ["the current text"]
    [vector] = vectors(tenant, record_id=record["id"])
    assert vector.content_digest != "an older text"


# --- real concurrency --------------------------------------------------------------------------


def _in_thread(work: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    """Run ``work`` in a thread with its own database connection; its outcome or exception
    lands in the returned list."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(work())
        except BaseException as exc:
            outcome.append(exc)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


def _wait_for_lock_wait(outcome: list[Any]) -> None:
    """Until another session of this database waits for a row lock (``outcome``: the
    waiting thread's, which must not have ended)."""
    with connection.cursor() as cursor:

        def waiting() -> bool:
            # Activity is read from a snapshot kept for the transaction: take a fresh one.
            cursor.execute("SELECT pg_stat_clear_snapshot()")
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
            )
            if cursor.fetchone()[0]:
                return True
            assert not outcome, f"the deletion ended without waiting: {outcome}"
            return False

        wait_ready(waiting, what="the deletion waiting for the batch's row lock", interval=0.05)


def _delete(tenant: Tenant, record_id: str) -> Callable[[], Any]:
    def work() -> Any:
        with tenant_scope(tenant.pk):
            record = MemoryRecord.objects.get(pk=record_id)
            return record_delete(record=record, actor=Actor.system("tests"), reason="erase")

    return work


@pytest.mark.django_db(transaction=True)
def test_a_record_deleted_after_its_row_was_claimed_is_not_written_back(agent, tenant, monkeypatch):
    """The deletion locks the record first, then waits for the row the batch holds: the batch
    passes over the record (SKIP LOCKED) and gives its row back, the deletion then removes
    the row."""
    doomed, kept = write(agent, key="doomed"), write(agent, key="kept")
    claim = embeddings_module.outbox_claim
    deleter: list[Any] = []

    def claim_then_delete(*args: Any, **kwargs: Any) -> Any:
        claimed = claim(*args, **kwargs)
        if claimed and not deleter:
            deleter.extend(_in_thread(_delete(tenant, doomed["id"])))
            _wait_for_lock_wait(deleter[1])
        return claimed

    monkeypatch.setattr(embeddings_module, "outbox_claim", claim_then_delete)
    outcome = embeddings_drain(tenant.pk)
    thread, result = deleter
    thread.join(30)
    assert not isinstance(result[0], BaseException), result
    assert outcome.embedded == 1
    assert outcome.deferred == 1
    assert vectors(tenant, record_id=doomed["id"]) == []
    assert len(vectors(tenant, record_id=kept["id"])) == 1
    with tenant_scope(tenant.pk):
        assert not MemoryRecord.objects.filter(pk=doomed["id"]).exists()
        assert not OutboxMessage.objects.filter(object_id=doomed["id"]).exists()
    assert background_work().waiting == 0


@pytest.mark.django_db(transaction=True)
def test_a_record_deleted_while_its_vector_is_written_loses_the_vector(agent, tenant, monkeypatch):
    """The batch locked the record first: the deletion waits for the batch to commit, then
    removes the vector it wrote."""
    doomed = write(agent, key="doomed")
    store = embeddings_module.sources_store
    deleter: list[Any] = []

    def delete_while_storing(**kwargs: Any) -> int:
        if not deleter:
            deleter.extend(_in_thread(_delete(tenant, doomed["id"])))
            _wait_for_lock_wait(deleter[1])
        return store(**kwargs)

    monkeypatch.setattr(embeddings_module, "sources_store", delete_while_storing)
    outcome = embeddings_drain(tenant.pk)
    thread, result = deleter
    thread.join(30)
    assert not isinstance(result[0], BaseException), result
    assert outcome.embedded == 1  # written and committed, then deleted with its record
    assert vectors(tenant) == []
    with tenant_scope(tenant.pk):
        assert not MemoryRecord.objects.filter(pk=doomed["id"]).exists()
        assert not OutboxMessage.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_two_workers_never_embed_the_same_record_twice(agent, tenant, monkeypatch):
    records = [write(agent, key=f"k.{n}", content=f"text {n}") for n in range(40)]
    original = HashingEmbedder.embed
    both_in_a_batch = threading.Barrier(2, timeout=30)
    embedded: list[tuple[str, str]] = []
    lock = threading.Lock()
    first_call: set[str] = set()

    def spying(self: HashingEmbedder, texts: Any) -> Any:
        name = threading.current_thread().name
        with lock:
            embedded.extend((name, text) for text in texts)
            first = name not in first_call
            first_call.add(name)
        if first:
            both_in_a_batch.wait()  # both batches hold their claims at the same moment
        return original(self, texts)

    monkeypatch.setattr(HashingEmbedder, "embed", spying)
    workers = [_in_thread(lambda: embeddings_drain(tenant.pk, limit=8)) for _ in range(2)]
    for thread, _ in workers:
        thread.join(60)
    outcomes = [result[0] for _, result in workers]
    assert not any(isinstance(o, BaseException) for o in outcomes), outcomes
    assert Counter(text for _, text in embedded) == Counter(f"text {n}" for n in range(40))
    assert len({name for name, _ in embedded}) == 2  # both workers took a share
    assert sum(o.embedded for o in outcomes) == 40
    for record in records:
        assert len(vectors(tenant, record_id=record["id"])) == 1


STALLING_DRAIN = """
import sys, time
from pathlib import Path
import django
django.setup()
from apps.derivations import embeddings
store = embeddings.sources_store
def stalling(**kwargs):
    written = store(**kwargs)  # the batch's vectors are written, not committed ...
    Path(sys.argv[2]).write_text("mid-batch")
    time.sleep(600)  # ... and the worker dies here
embeddings.sources_store = stalling
embeddings.embeddings_drain(sys.argv[1])
"""


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_mid_batch_leaves_nothing_and_the_relay_offers_the_rows_again(
    agent, tenant, tmp_path, settings
):
    records = [write(agent, key=f"k.{n}") for n in range(5)]
    assert outbox_relay(wake=lambda tenant_id: None) == 5  # published; the wake-up is lost
    marker = tmp_path / "mid-batch"
    env = {
        **os.environ,
        "MEMORYCONSOLE_DATABASE_NAME": connections["default"].settings_dict["NAME"],
        "DJANGO_SETTINGS_MODULE": "memoryconsole.settings",
    }
    worker = subprocess.Popen(
        [sys.executable, "-c", STALLING_DRAIN, str(tenant.pk), str(marker)],
        env=env,
        cwd=Path(__file__).resolve().parents[2],
        start_new_session=True,
    )
    try:
        wait_ready(marker.exists, what="the drain reaching the middle of a batch", process=worker)
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(10)
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait(10)
    # The batch rolled back with its connection: no vector, no row finished, no attempt
    # counted (a kill is not the source's fault).
    wait_ready(
        lambda: (
            not vectors(tenant) and all(row.state == OutboxState.PUBLISHED for row in rows(tenant))
        ),
        what="the end of the killed batch's transaction",
    )
    assert all(row.attempts == 0 for row in rows(tenant))
    assert outbox_relay(wake=lambda tenant_id: None) == 0  # published recently: not yet
    settings.OUTBOX_REDELIVER_AFTER = 0  # the redelivery delay has passed
    woken: list[str] = []
    assert outbox_relay(wake=lambda tenant_id: woken.append(str(tenant_id))) == 5
    assert woken == [str(tenant.pk)]
    app.tasks["derivations.embed_pending"].apply(headers={TENANT_HEADER: woken[0]})
    app.tasks["derivations.embed_pending"].apply(headers={TENANT_HEADER: woken[0]})
    for record in records:
        assert len(vectors(tenant, record_id=record["id"])) == 1
    assert {row.state for row in rows(tenant)} == {OutboxState.DONE}
