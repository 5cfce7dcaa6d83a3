"""Periodic state work: closing runs their agents left open."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from apps.tenancy.context import current_tenant_id
from apps.tenancy.models import Tenant
from apps.tenancy.tasks import TenantTask

from .services import runs_close_idle


@shared_task(name="state.close_idle_runs_all", acks_late=True, time_limit=300)
def close_idle_runs_all() -> int:
    """Fan out: one idle-run sweep per tenant, each carrying its tenant context."""
    return close_idle_runs.for_each_tenant()


@shared_task(
    name="state.close_idle_runs",
    base=TenantTask,  # named so the fan-out above type-checks its for_each_tenant
    acks_late=True,
    time_limit=300,
    soft_time_limit=270,
    autoretry_for=(Exception,),
    retry_backoff=True,
    max_retries=5,
)
def close_idle_runs(**_: Any) -> int:
    """Close the current tenant's idle runs (``apps.state.services.runs_close_idle``);
    idempotent: a closed run is no longer idle."""
    tenant_id = current_tenant_id()
    tenant = Tenant.objects.filter(pk=tenant_id).first() if tenant_id else None
    if tenant is None:
        return 0
    return runs_close_idle(tenant=tenant)
