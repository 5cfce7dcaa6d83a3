"""Helpers for retrieval tests: embed records synchronously (the worker does it in production)."""

from __future__ import annotations

from typing import Any

from apps.derivations.embedders import get_embedder
from apps.derivations.embeddings import embedding_upsert
from apps.records.models import MemoryRecord
from apps.tenancy.context import tenant_scope


def embed_all(tenant: Any) -> None:
    """Give every record of ``tenant`` its embedding for the tenant's model."""
    embedder = get_embedder(tenant.embedding_model)
    with tenant_scope(tenant.pk):
        records = list(MemoryRecord.objects.filter(embeddings__isnull=True))
        if not records:
            return
        vectors = embedder.embed([r.content for r in records])
        for record, vector in zip(records, vectors, strict=True):
            embedding_upsert(
                tenant_id=tenant.pk,
                model=embedder.name,
                vector=vector,
                content_digest="test",
                record_id=record.pk,
            )
