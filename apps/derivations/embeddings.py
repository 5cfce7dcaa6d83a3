"""Storing and choosing embeddings."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.utils import timezone

from apps.tenancy.models import Tenant

from .embedders import Embedder, get_embedder
from .models import Embedding


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
) -> Embedding:
    """Store the vector of one record or summary for ``model``, replacing an older one.

    Idempotent: a re-run (a retried task) updates the same row instead of adding another.
    """
    lookup: dict[str, Any] = {"model": model}
    if record_id is not None:
        lookup["record_id"] = record_id
    else:
        lookup["summary_id"] = summary_id
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


def _tenant() -> Tenant:
    from apps.tenancy.context import current_tenant_id

    tenant_id = current_tenant_id()
    if tenant_id is None:
        raise RuntimeError("embedding needs a tenant scope")
    return Tenant.objects.get(pk=tenant_id)


def record_embed(record_id: Any) -> str:
    """Embed one record version (current tenant) with the tenant's model; idempotent.

    The record row is locked, so a delete waits for the embedding (and then removes it) or the
    embedding waits for the delete (and finds nothing): no vector outlives its record.
    """
    from apps.records.models import MemoryRecord
    from apps.records.services import record_digest

    record = MemoryRecord.objects.select_for_update().filter(pk=record_id).first()
    if record is None:
        return "missing"
    embedder = tenant_embedder(_tenant())
    if not embedder.computes:
        return "client-vectors"  # the agent sends them with the write
    vector = embedder.embed([record.content])[0]
    embedding_upsert(
        tenant_id=record.tenant_id,
        model=embedder.name,
        vector=[float(x) for x in vector],
        content_digest=record_digest(record),
        record_id=record.pk,
    )
    return "embedded"


def summary_embed(summary_id: Any) -> str:
    """Embed one valid summary (current tenant); an invalid one keeps no embedding."""
    from apps.audit.services import content_digest

    from .models import Summary

    summary = Summary.objects.select_for_update().filter(pk=summary_id).first()
    if summary is None:
        return "missing"
    if not summary.valid:
        Embedding.objects.filter(summary=summary).delete()
        return "invalid"
    embedder = tenant_embedder(_tenant())
    if not embedder.computes:
        return "client-vectors"
    vector = embedder.embed([summary.text])[0]
    embedding_upsert(
        tenant_id=summary.tenant_id,
        model=embedder.name,
        vector=[float(x) for x in vector],
        content_digest=content_digest({"summary": summary.text}),
        summary_id=summary.pk,
    )
    return "embedded"
