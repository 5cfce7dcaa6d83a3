"""Summaries, embeddings and outbox messages."""

from __future__ import annotations

import uuid
from typing import Any

import factory

from apps.derivations.models import Embedding, Summary, SummarySource
from apps.derivations.services import summary_create
from apps.tenancy.context import tenant_scope
from apps.work.models import OutboxMessage

from .base import SYSTEM, TenantOwnedFactory, now, tenant_id_of
from .records import SAME_TENANT, MemoryRecordFactory


class SummaryFactory(TenantOwnedFactory[Summary]):
    """A summary of ``sources`` (records; by default one new record of the tenant), made by
    ``summary_create``: it points at each source, takes their highest sensitivity, marks the
    tenant as one search plans summaries for, queues its embedding and audits it."""

    text = "a summary"
    reason = "context for checkout"
    sources = factory.List(
        [factory.SubFactory(MemoryRecordFactory, tenant=factory.SelfAttribute("...tenant"))]
    )

    class Meta:
        model = Summary

    @classmethod
    def _build(cls, model_class: type[Summary], *args: Any, **kwargs: Any) -> Summary:
        kwargs.pop("sources")
        return super()._build(model_class, *args, **kwargs)

    @classmethod
    def _create(cls, model_class: type[Summary], *args: Any, **kwargs: Any) -> Summary:
        sources = [{"type": "record", "id": record.pk} for record in kwargs.pop("sources")]
        with tenant_scope(tenant_id_of(kwargs)):
            return summary_create(actor=SYSTEM, sources=sources, **kwargs)


class SummarySourceFactory(TenantOwnedFactory[SummarySource]):
    """A bare pointer from a summary to a record version (or, with ``source_type="episode"``
    and ``source_id``, to an episode)."""

    summary = factory.SubFactory(SummaryFactory, tenant=SAME_TENANT)
    source_type = "record"
    source_id = factory.LazyFunction(uuid.uuid4)
    fact = None

    class Meta:
        model = SummarySource


def unit_vector(dimension: int, axis: int = 0) -> list[float]:
    return [1.0 if i == axis else 0.0 for i in range(dimension)]


class EmbeddingFactory(TenantOwnedFactory[Embedding]):
    """A record's vector for a model (the database copies the record's scope onto it); pass
    ``vector`` for a model of another dimension."""

    record = factory.SubFactory(MemoryRecordFactory, tenant=SAME_TENANT)
    summary = None
    model = "hashing-256"
    vector = factory.LazyFunction(lambda: unit_vector(256))
    dimension = factory.LazyAttribute(lambda o: len(o.vector))
    content_digest = "test"
    created_at = factory.LazyFunction(now)

    class Meta:
        model = Embedding


class OutboxMessageFactory(TenantOwnedFactory[OutboxMessage]):
    """Pending work: by default a record's embedding."""

    task_name = "derivations.embed_record"
    payload = factory.LazyFunction(dict)
    object_id = None
    created_at = factory.LazyFunction(now)

    class Meta:
        model = OutboxMessage
