"""What the derivations app does when the apps below it ask (their ``signals`` modules):
derived data follows a record (its embedding made at write, its summaries' class raised,
described on its detail, an agent's vector checked and stored) and a stored response about a
summary citing an expired version is not replayed. Connected on import (apps.py)."""

from __future__ import annotations

from typing import Any

from django.dispatch import receiver

from apps.api.signals import stored_response_expired
from apps.records import signals as records
from apps.records.models import SENSITIVITY_ORDER
from apps.tenancy.models import Tenant

from .embeddings import (
    client_vector_check,
    client_vector_store,
    record_embedding_at_write,
    record_embedding_now,
)
from .models import Summary, SummarySource
from .selectors import derived_from_record, summary_cites_expired


@receiver(records.embed_record, dispatch_uid="derivations.embed_record")
def embed_record(*, subject: Any, stored: bool, **_: Any) -> bool:
    if stored:
        return record_embedding_now(subject)
    return record_embedding_at_write(subject)


@receiver(records.derived_class_raise, dispatch_uid="derivations.class_raise")
def class_raise(*, record_id: Any, sensitivity: str, **_: Any) -> int:
    """Raise the summaries citing the version ``record_id`` to ``sensitivity`` where lower (a
    summary is as sensitive as the most sensitive thing it cites); returns how many."""
    lower = SENSITIVITY_ORDER[: SENSITIVITY_ORDER.index(sensitivity)]
    citing = SummarySource.objects.filter(source_type="record", source_id=record_id)
    return Summary.objects.filter(pk__in=citing.values("summary_id"), sensitivity__in=lower).update(
        sensitivity=sensitivity
    )


@receiver(records.derived_artifacts, dispatch_uid="derivations.derived_artifacts")
def derived_artifacts(*, record: Any, **_: Any) -> dict[str, list[Any]]:
    return derived_from_record(record)


@receiver(records.client_vector_check, dispatch_uid="derivations.client_vector_check")
def vector_check(*, raw: Any, tenant: Tenant, **_: Any) -> tuple[list[float] | None, list[str]]:
    return client_vector_check(raw, tenant=tenant)


@receiver(records.client_vector_store, dispatch_uid="derivations.client_vector_store")
def vector_store(*, tenant: Tenant, vector: Any, record: Any, **_: Any) -> None:
    client_vector_store(tenant=tenant, vector=vector, record=record)


@receiver(stored_response_expired, dispatch_uid="derivations.summary_expired")
def summary_expired(*, pk: Any, **_: Any) -> bool:
    return summary_cites_expired(pk)
