"""Storing and choosing embeddings."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.utils import timezone

from apps.tenancy.models import Tenant

from .embedders import Embedder, get_embedder
from .models import Embedding
from .vectors import VectorRejected, vector_checked, vector_storable


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
    stored = embedding_upsert(
        tenant_id=record.tenant_id,
        model=embedder.name,
        vector=[float(x) for x in vector],
        content_digest=record_digest(record),
        record_id=record.pk,
    )
    return "embedded" if stored else "no-vector"


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
    stored = embedding_upsert(
        tenant_id=summary.tenant_id,
        model=embedder.name,
        vector=[float(x) for x in vector],
        content_digest=content_digest({"summary": summary.text}),
        summary_id=summary.pk,
    )
    return "embedded" if stored else "no-vector"


# --- vectors sent by agents (tenant model ``client-<dim>``) ------------------------------------

VECTOR_FIELD = "vector"


def client_vector_split(
    body: Any, *, tenant: Tenant
) -> tuple[Any, list[float] | None, dict[str, list[str]]]:
    """Take the optional ``vector`` out of a write body (a record's or a summary's).

    Returns the body without it, the checked vector (or None when absent) and the errors
    naming ``vector``: with a ``client-<dim>`` model it must pass
    :func:`apps.derivations.vectors.vector_checked`; with a model the server computes, no
    vector is accepted (it would be compared with vectors of another model)."""
    if not isinstance(body, dict) or VECTOR_FIELD not in body:
        return body, None, {}
    rest = {name: value for name, value in body.items() if name != VECTOR_FIELD}
    raw = body[VECTOR_FIELD]
    if raw is None:
        return rest, None, {}
    embedder = tenant_embedder(tenant)
    if embedder.computes:
        return (
            rest,
            None,
            {
                VECTOR_FIELD: [
                    f"This tenant's embedding model ({embedder.name}) computes vectors from "
                    "the text; send no vector."
                ]
            },
        )
    try:
        return rest, vector_checked(raw, dimension=embedder.dimension, model=embedder.name), {}
    except VectorRejected as rejected:
        return rest, None, {VECTOR_FIELD: [str(rejected)]}


def client_vector_store(
    *, tenant: Tenant, vector: Sequence[float], record: Any = None, summary: Any = None
) -> None:
    """Store an agent's vector (checked by :func:`client_vector_split`) as the embedding of
    ``record`` or ``summary``, in the caller's transaction (one INSERT). A source that already
    has a vector of the model keeps it: a repeated write of the same value returns the stored
    version, whose vector was sent with its first write."""
    from apps.audit.services import content_digest
    from apps.records.services import record_digest

    if record is not None:
        digest = record_digest(record)
    else:
        digest = content_digest({"summary": summary.text})
    Embedding.objects.bulk_create(
        [
            Embedding(
                tenant_id=tenant.pk,
                record_id=record.pk if record is not None else None,
                summary_id=summary.pk if summary is not None else None,
                model=tenant_embedder(tenant).name,
                dimension=len(vector),
                vector=list(vector),
                content_digest=digest,
                created_at=timezone.now(),
            )
        ],
        ignore_conflicts=True,
    )
