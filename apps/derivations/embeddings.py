"""Storing and choosing embeddings, and the drain that embeds queued work in batches."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.utils import timezone

from apps.audit.services import content_digest
from apps.core.metrics import embedding_rows
from apps.records.models import MemoryRecord
from apps.records.services import record_digest
from apps.tenancy.context import current_tenant_id, tenant_scope
from apps.tenancy.models import Tenant
from apps.work.outbox import (
    EMBED_RECORD,
    EMBED_SUMMARY,
    EMBED_TASKS,
    outbox_claim,
    outbox_defer,
    outbox_done,
    outbox_failed,
)
from apps.work.queued import work_queued_only

from .embedders import Embedder, get_embedder
from .models import Embedding, Summary
from .vectors import VectorRejected, vector_checked, vector_storable

logger = logging.getLogger(__name__)


def tenant_embedder(tenant: Tenant) -> Embedder:
    return get_embedder(tenant.embedding_model)


def embedding_upsert(
    *,
    tenant_id: Any,
    model: str,
    vector: Sequence[float],
    content_digest: str,
    record_id: Any = None,
    summary_id: Any = None,
) -> Embedding | None:
    """Store the vector of one record or summary for ``model``, replacing an older one.

    Idempotent: a re-run (a retried task) updates the same row instead of adding another. A
    computed vector pgvector could not compare (the hashing model's zero vector for a text
    without a word) is not stored, and replaces nothing: the source stays unembedded, as one
    the model cannot place, and is found by its text alone.
    """
    lookup: dict[str, Any] = {"model": model}
    if record_id is not None:
        lookup["record_id"] = record_id
    else:
        lookup["summary_id"] = summary_id
    if not vector_storable(vector):
        Embedding.objects.filter(**lookup).delete()
        return None
    embedding, _ = Embedding.objects.update_or_create(
        **lookup,
        defaults={
            "tenant_id": tenant_id,
            "dimension": len(vector),
            "vector": list(vector),
            "content_digest": content_digest,
            "created_at": timezone.now(),
        },
    )
    return embedding


def _embedding(
    *, tenant_id: Any, model: str, vector: Sequence[float], digest: str, **source: Any
) -> Embedding:
    """An unsaved embedding of one source (``record_id=`` or ``summary_id=``)."""
    return Embedding(
        tenant_id=tenant_id,
        model=model,
        dimension=len(vector),
        vector=[float(x) for x in vector],
        content_digest=digest,
        created_at=timezone.now(),
        **source,
    )


def _tenant() -> Tenant:
    tenant_id = current_tenant_id()
    if tenant_id is None:
        raise RuntimeError("embedding needs a tenant scope")
    return Tenant.objects.get(pk=tenant_id)


@dataclass(frozen=True)
class Source:
    """One locked record version or summary to embed: its text and digest."""

    pk: Any
    text: str
    digest: str


def sources_store(
    *, tenant_id: Any, embedder: Embedder, records: list[Source], summaries: list[Source]
) -> int:
    """Give every source a vector of ``embedder``: one embedder call for them all, then the
    rows in bulk. Idempotent: a source whose vector of this model has the same digest keeps
    it (a batch run again after a crash embeds nothing twice), one with another digest gets
    it replaced. The caller holds the sources' locks. Returns how many vectors it wrote."""
    keep: set[Any] = set()
    for field, sources in (("record_id", records), ("summary_id", summaries)):
        if not sources:
            continue
        digests = {source.pk: source.digest for source in sources}
        existing = Embedding.objects.filter(
            **{f"{field}__in": list(digests), "model": embedder.name}
        ).values_list(field, "content_digest")
        stale = []
        for pk, digest in existing:
            if digests[pk] == digest:
                keep.add(pk)
            else:
                stale.append(pk)
        if stale:
            Embedding.objects.filter(**{f"{field}__in": stale, "model": embedder.name}).delete()
    todo = [
        (field, source)
        for field, sources in (("record_id", records), ("summary_id", summaries))
        for source in sources
        if source.pk not in keep
    ]
    if not todo:
        return 0
    computed = embedder.embed([source.text for _, source in todo])
    # A computed vector pgvector could not compare (the hashing model's zero vector for a text
    # without a word) is not stored: that source stays unembedded and is found by its text.
    pairs = [
        (item, vector)
        for item, vector in zip(todo, computed, strict=True)
        if vector_storable(vector)
    ]
    Embedding.objects.bulk_create(
        [
            _embedding(
                tenant_id=tenant_id,
                model=embedder.name,
                vector=vector,
                digest=source.digest,
                **{field: source.pk},
            )
            for (field, source), vector in pairs
        ]
    )
    return len(pairs)


def _record_source(record: Any) -> Source:
    return Source(record.pk, record.content, record_digest(record))


def record_embedding_at_write(record: Any) -> bool:
    """Whether the version about to be inserted in the caller's transaction is embedded at
    once (the tenant's model embeds at write): then the write path calls
    :func:`record_embedding_now` once the version is stored (an embedding names a stored
    version: its trigger reads the version's scope); else it queues the outbox row the worker
    embeds from after commit."""
    return _embeds_inline(get_embedder(record.tenant.embedding_model))


def _embeds_inline(embedder: Embedder) -> bool:
    """Whether a record's embedding is made in the write's transaction: the tenant's model is
    fast enough, and the caller did not ask for all work to be queued (a batch, an import)."""
    return embedder.computes and embedder.inline and not work_queued_only()


def record_embedding_now(record: Any) -> bool:
    """Embed a stored version inside the caller's transaction where the tenant's model embeds
    at write (a new version, a reviewer's corrected value, a redacted record's new content),
    so a search right after the write finds it by meaning. False where it does not: the
    caller queues it for the worker."""
    embedder = get_embedder(record.tenant.embedding_model)
    if not _embeds_inline(embedder):
        return False  # a slow model, or an agent's own vectors: the worker's
    vector = embedder.embed([record.content])[0]
    if not vector_storable(vector):
        return False  # a text the model cannot place
    # Every caller's version has no vector yet (a new version, or one whose vectors its
    # redaction just withdrew): one INSERT.
    _embedding(
        tenant_id=record.tenant_id,
        model=embedder.name,
        vector=vector,
        digest=record_digest(record),
        record_id=record.pk,
    ).save(force_insert=True)
    return True


def _summary_source(summary: Any) -> Source:
    return Source(summary.pk, summary.text, content_digest({"summary": summary.text}))


# The fields a record's text and digest are made of (``record_digest``).
RECORD_FIELDS = ("id", "tenant_id", "subject", "key", "value", "content")


def record_embed(record_id: Any) -> str:
    """Embed one record version (current tenant) with the tenant's model; idempotent.

    The record row is locked, so a delete waits for the embedding (and then removes it) or the
    embedding waits for the delete (and finds nothing): no vector outlives its record.
    """

    record = MemoryRecord.objects.select_for_update().only(*RECORD_FIELDS).filter(pk=record_id)
    found = record.first()
    if found is None:
        return "missing"
    return _embed_one(records=[_record_source(found)], summaries=[])


def summary_embed(summary_id: Any) -> str:
    """Embed one valid summary (current tenant); an invalid one keeps no embedding."""

    summary = Summary.objects.select_for_update().filter(pk=summary_id).first()
    if summary is None:
        return "missing"
    if not summary.valid:
        Embedding.objects.filter(summary=summary).delete()
        return "invalid"
    return _embed_one(records=[], summaries=[_summary_source(summary)])


def _embed_one(*, records: list[Source], summaries: list[Source]) -> str:
    tenant = _tenant()
    embedder = tenant_embedder(tenant)
    if not embedder.computes:
        return "client-vectors"  # the agent sends them with the write
    stored = sources_store(
        tenant_id=tenant.pk, embedder=embedder, records=records, summaries=summaries
    )
    return "embedded" if stored else "no-vector"


# --- the embedding drain: queued embeddings, a batch at a time ---------------------------------

# Rows claimed per batch: one embedder call and one INSERT for all of them.
BATCH_SIZE = 256
# A drain hands its worker thread back after this long (waking the tenant again if it was
# still finding work), so the relay and the erasure jobs queued behind it run too.
RUN_BUDGET_SECONDS = 5.0
# A row whose source another transaction holds (a deletion, a redaction, a promotion) is
# given back for this long instead of waiting for the lock: waiting could deadlock with a
# deletion, which holds the source and wants the row.
LOCKED_SOURCE_DELAY = timedelta(seconds=1)


@dataclass
class BatchOutcome:
    """What one batch (or a drain, summed) did with the rows it claimed."""

    claimed: int = 0
    embedded: int = 0  # vectors written
    finished: int = 0  # rows done (embedded, unchanged, missing, invalid, client vectors)
    deferred: int = 0  # rows given back: their source was locked by another transaction
    failed: int = 0  # rows of batches that raised (counted as a failed attempt)

    def add(self, other: BatchOutcome) -> None:
        for name in ("claimed", "embedded", "finished", "deferred", "failed"):
            setattr(self, name, getattr(self, name) + getattr(other, name))


def embeddings_batch(
    *, limit: int = BATCH_SIZE, retried: bool = False, claimed: list[Any] | None = None
) -> BatchOutcome:
    """Claim up to ``limit`` queued embeddings of the current tenant and finish them, in the
    caller's transaction (the tenant scope): sources locked, one embedder call, the vectors
    written in bulk, the rows marked done. Ids of the claimed rows are appended to
    ``claimed`` as soon as they are known, so a caller can count a failed attempt on them.

    Sources are locked ``SKIP LOCKED``: one held by another transaction is not waited for
    (a deletion holding a record wants its outbox row, which this batch holds); its row is
    given back (``LOCKED_SOURCE_DELAY``). A source that no longer exists (deleted) or a
    summary no longer valid gets no vector, so nothing deleted is written back: the deletion
    either committed before the lock (the source is gone) or waits for this batch and then
    removes what it wrote.
    """

    now = timezone.now()
    rows = outbox_claim(EMBED_TASKS, limit=limit, retried=retried, now=now)
    if claimed is not None:
        claimed.extend(row.pk for row in rows)
    outcome = BatchOutcome(claimed=len(rows))
    if not rows:
        return outcome
    tenant = _tenant()
    embedder = tenant_embedder(tenant)
    if not embedder.computes:  # client vectors: the agent sent them with the write
        outcome.finished = outbox_done([row.pk for row in rows], now=now)
        return outcome

    def wanted(task_name: str) -> dict[Any, list[Any]]:
        by_source: dict[Any, list[Any]] = {}
        for row in rows:
            if row.task_name == task_name and row.object_id is not None:
                by_source.setdefault(row.object_id, []).append(row.pk)
        return by_source

    record_rows, summary_rows = wanted(EMBED_RECORD), wanted(EMBED_SUMMARY)
    records = list(
        MemoryRecord.objects.select_for_update(skip_locked=True)
        .only(*RECORD_FIELDS)
        .filter(pk__in=list(record_rows))
    )
    summaries = list(
        Summary.objects.select_for_update(skip_locked=True)
        .only("id", "tenant_id", "text", "valid")
        .filter(pk__in=list(summary_rows))
    )
    invalid = [summary.pk for summary in summaries if not summary.valid]
    if invalid:
        Embedding.objects.filter(summary_id__in=invalid).delete()
    # Not locked by this batch: gone (its row is done), or held by another transaction (its
    # row is given back).
    rows_of = {**record_rows, **summary_rows}
    locked = {record.pk for record in records} | {summary.pk for summary in summaries}
    unlocked = [pk for pk in rows_of if pk not in locked]
    held = set(MemoryRecord.objects.filter(pk__in=unlocked).values_list("pk", flat=True))
    held |= set(Summary.objects.filter(pk__in=unlocked).values_list("pk", flat=True))
    outcome.embedded = sources_store(
        tenant_id=tenant.pk,
        embedder=embedder,
        records=[_record_source(record) for record in records],
        summaries=[_summary_source(summary) for summary in summaries if summary.valid],
    )
    deferred = {pk for source in held for pk in rows_of[source]}
    outcome.deferred = outbox_defer(deferred, until=now + LOCKED_SOURCE_DELAY)
    outcome.finished = outbox_done([row.pk for row in rows if row.pk not in deferred], now=now)
    return outcome


Waker = Callable[[Any], None]


def embeddings_drain(
    tenant_id: Any,
    *,
    limit: int = BATCH_SIZE,
    budget: float = RUN_BUDGET_SECONDS,
    wake: Waker | None = None,
) -> BatchOutcome:
    """Finish ``tenant_id``'s queued embeddings, a batch per transaction, until none is left
    that may be taken now or ``budget`` seconds have passed.

    Each batch runs in its own transaction as the tenant (row-level security as everywhere),
    so what it embedded is committed and visible before the next begins. A batch that raises
    rolls back and counts a failed attempt on each of its rows; rows that failed before are
    then taken one per batch, so one source the embedder cannot take fails only itself.
    ``wake`` (a worker passes its broker's) is called to let another worker thread help when
    a batch comes back full, and to continue later when the budget ran out with work left.
    """

    deadline = time.monotonic() + budget
    total = BatchOutcome()
    helped = False
    while True:
        progressed = False
        for retried in (False, True):
            claimed: list[Any] = []
            try:
                with tenant_scope(tenant_id):
                    outcome = embeddings_batch(
                        limit=1 if retried else limit, retried=retried, claimed=claimed
                    )
            except Exception as exc:
                if not claimed:
                    raise  # nothing claimed (the database is away): the relay offers it again
                logger.warning("an embedding batch of %d rows failed", len(claimed), exc_info=True)
                with tenant_scope(tenant_id):
                    outbox_failed(claimed, error=repr(exc), now=timezone.now())
                total.failed += len(claimed)
                embedding_rows.labels("failed").inc(len(claimed))
                progressed = True
                continue
            total.add(outcome)
            # Counted once the batch's transaction has committed: /metrics' drain rate is
            # work that stays done.
            embedding_rows.labels("finished").inc(outcome.finished)
            embedding_rows.labels("deferred").inc(outcome.deferred)
            if outcome.claimed:
                progressed = True
            if outcome.claimed >= limit and not retried and wake is not None and not helped:
                helped = True  # a full batch: more may be waiting; one more thread joins
                wake(tenant_id)
        if not progressed:
            return total
        if time.monotonic() >= deadline:
            if wake is not None:
                wake(tenant_id)
            return total


# --- vectors sent by agents (tenant model ``client-<dim>``) ------------------------------------


def client_vector_check(raw: Any, *, tenant: Tenant) -> tuple[list[float] | None, list[str]]:
    """An agent's vector on a write (a record's or a summary's), checked: the vector (None
    when refused) and why it was refused. With a ``client-<dim>`` model it must pass
    :func:`apps.derivations.vectors.vector_checked`; with a model the server computes, no
    vector is accepted (it would be compared with vectors of another model)."""
    embedder = tenant_embedder(tenant)
    if embedder.computes:
        return None, [
            f"This tenant's embedding model ({embedder.name}) computes vectors from the text; "
            "send no vector."
        ]
    try:
        return vector_checked(raw, dimension=embedder.dimension, model=embedder.name), []
    except VectorRejected as rejected:
        return None, [str(rejected)]


def client_vector_store(
    *, tenant: Tenant, vector: Sequence[float], record: Any = None, summary: Any = None
) -> None:
    """Store an agent's vector (checked by :func:`client_vector_check`) as the embedding of
    ``record`` or ``summary``, in the caller's transaction (one INSERT). A source that already
    has a vector of the model keeps it: a repeated write of the same value returns the stored
    version, whose vector was sent with its first write."""

    source = _record_source(record) if record is not None else _summary_source(summary)
    Embedding.objects.bulk_create(
        [
            _embedding(
                tenant_id=tenant.pk,
                model=tenant_embedder(tenant).name,
                vector=vector,
                digest=source.digest,
                record_id=record.pk if record is not None else None,
                summary_id=summary.pk if summary is not None else None,
            )
        ],
        ignore_conflicts=True,
    )
