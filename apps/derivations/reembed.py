"""Re-embedding a tenant's live records and valid summaries (``memoryconsole reembed``).

Batches, each its own transaction as the tenant (``tenant_scope``: row-level security as in
the worker), take only sources with no embedding of the model yet, so a killed run continues
when run again and nothing is embedded twice (``ON CONFLICT DO NOTHING`` on the (source,
model) constraint covers a worker embedding the same source meanwhile). A batch's sources are
locked while their vectors are stored: a concurrent delete waits (then removes the new
vectors) or goes first (and the batch no longer sees the source).

With a new model, the tenant keeps its old one until every source has a vector of the new
one, so search by vector keeps working; then the setting changes and a last pass embeds what
was written in between (the worker embeds later writes with the new model).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db.models import Exists, OuterRef, QuerySet
from django.utils import timezone

from apps.audit.services import content_digest
from apps.records.selectors import records_live
from apps.records.services import record_digest
from apps.tenancy.context import tenant_scope
from apps.tenancy.models import Tenant

from .embedders import Embedder, EmbedderUnavailable, get_embedder
from .models import Embedding, Summary
from .vectors import vector_storable

BATCH_SIZE = 256

Progress = Callable[[int, int], None]


class ReembedRefused(EmbedderUnavailable):
    """The model cannot be computed here (``client-<dim>``: agents send those vectors)."""


@dataclass
class ReembedResult:
    tenant: str
    model: str
    records: int = 0
    summaries: int = 0
    model_changed: bool = False

    @property
    def embedded(self) -> int:
        return self.records + self.summaries


def reembed_embedder(model: str) -> Embedder:
    """The embedder for ``model``, refusing ``client`` models (nothing to compute)."""
    embedder = get_embedder(model)
    if not embedder.computes:
        raise ReembedRefused(
            f"{embedder.name} vectors are sent by agents with each write; there is nothing "
            "to compute. Choose a hashing-<dim> or st-<model> model."
        )
    return embedder


def _pending_records(model: str) -> QuerySet[Any]:
    embedded = Embedding.objects.filter(record_id=OuterRef("pk"), model=model)
    return records_live().exclude(Exists(embedded))


def _pending_summaries(model: str) -> QuerySet[Summary]:
    embedded = Embedding.objects.filter(summary_id=OuterRef("pk"), model=model)
    return Summary.objects.filter(valid=True).exclude(Exists(embedded))


def reembed_pending(tenant: Tenant, model: str) -> int:
    """How many live records and valid summaries of ``tenant`` lack a ``model`` vector."""
    with tenant_scope(tenant.pk):
        return _pending_records(model).count() + _pending_summaries(model).count()


def _in_batches(
    tenant: Tenant,
    pending: Callable[[], QuerySet[Any]],
    size: int,
    handle: Callable[[list[Any]], None],
) -> None:
    """Call ``handle`` with locked batches of pending sources in id order, each batch in its
    own transaction as ``tenant``: what ``handle`` stores commits with the batch."""
    after = None
    while True:
        with tenant_scope(tenant.pk):
            queryset = pending().order_by("pk").select_for_update(of=("self",))
            if after is not None:
                queryset = queryset.filter(pk__gt=after)
            batch = list(queryset[:size])
            if not batch:
                return
            handle(batch)
        after = batch[-1].pk


def _store(tenant: Tenant, embedder: Embedder, texts: list[str], rows: list[dict[str, Any]]) -> int:
    vectors = embedder.embed(texts)
    now = timezone.now()
    embeddings = [
        Embedding(
            tenant_id=tenant.pk,
            model=embedder.name,
            dimension=embedder.dimension,
            vector=[float(x) for x in vector],
            created_at=now,
            **row,
        )
        for row, vector in zip(rows, vectors, strict=True)
        # As embedding_upsert: a vector pgvector cannot compare leaves its source unembedded.
        if vector_storable(vector)
    ]
    # ignore_conflicts: a worker stored this (source, model) meanwhile.
    Embedding.objects.bulk_create(embeddings, ignore_conflicts=True)
    return len(embeddings)


def _embed_pass(
    tenant: Tenant,
    embedder: Embedder,
    result: ReembedResult,
    *,
    batch_size: int,
    progress: Progress | None,
    total: int,
) -> None:
    def records(batch: list[Any]) -> None:
        result.records += _store(
            tenant,
            embedder,
            [r.content for r in batch],
            [{"record_id": r.pk, "content_digest": record_digest(r)} for r in batch],
        )
        if progress is not None:
            progress(result.embedded, max(total, result.embedded))

    def summaries(batch: list[Any]) -> None:
        result.summaries += _store(
            tenant,
            embedder,
            [s.text for s in batch],
            [
                {"summary_id": s.pk, "content_digest": content_digest({"summary": s.text})}
                for s in batch
            ],
        )
        if progress is not None:
            progress(result.embedded, max(total, result.embedded))

    _in_batches(tenant, lambda: _pending_records(embedder.name), batch_size, records)
    _in_batches(tenant, lambda: _pending_summaries(embedder.name), batch_size, summaries)


def tenant_reembed(
    tenant: Tenant,
    *,
    model: str | None = None,
    batch_size: int = BATCH_SIZE,
    progress: Progress | None = None,
) -> ReembedResult:
    """Give every live record and valid summary of ``tenant`` a vector of ``model`` (default:
    the tenant's), skipping those that have one; with another model than the tenant's, make
    it the tenant's model once every source has its vector. ``progress`` is called after
    each batch with (embedded so far, to embed)."""
    embedder = reembed_embedder(model or tenant.embedding_model)
    result = ReembedResult(tenant=tenant.slug, model=embedder.name)
    total = reembed_pending(tenant, embedder.name)
    _embed_pass(tenant, embedder, result, batch_size=batch_size, progress=progress, total=total)
    if tenant.embedding_model != embedder.name:
        Tenant.objects.filter(pk=tenant.pk).update(embedding_model=embedder.name)
        tenant.embedding_model = embedder.name
        result.model_changed = True
        # Written while the tenant still had its old model: the worker embedded those with it.
        total = result.embedded + reembed_pending(tenant, embedder.name)
        _embed_pass(tenant, embedder, result, batch_size=batch_size, progress=progress, total=total)
    return result
