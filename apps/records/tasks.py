"""Retention work: compaction of expired facts, per tenant, through the deletion path."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from apps.api.idempotency import purge_expired
from apps.tenancy.tasks import TenantTask

from .purge import records_compact_expired


@shared_task(name="records.compact_expired_all", acks_late=True, time_limit=300)
def compact_expired_all() -> int:
    """Fan out: one compaction task per tenant, each carrying its tenant context."""
    return compact_expired.for_each_tenant()


@shared_task(
    name="records.compact_expired",
    base=TenantTask,  # named so the fan-out above type-checks its for_each_tenant
    acks_late=True,
    time_limit=300,
    soft_time_limit=270,
    autoretry_for=(Exception,),
    retry_backoff=True,
    max_retries=5,
)
def compact_expired(**_: Any) -> int:
    """Delete the current tenant's expired facts (legal holds are kept) and stored API
    responses past their 24 hours; idempotent."""
    purge_expired()
    return records_compact_expired()
