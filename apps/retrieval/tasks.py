"""Retrieval upkeep in the worker: per-tenant HNSW indexes follow the tenants' sizes."""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings

from apps.core.database import MaintenanceBusy

from .tenant_indexes import tenant_indexes_sync

logger = logging.getLogger(__name__)


# Acknowledged on receipt, not after: a build can outlast the broker's visibility timeout,
# and the hourly schedule (with an interrupted build's invalid index dropped and built again)
# is the retry.
@shared_task(
    name="retrieval.tenant_indexes", acks_late=False, time_limit=2 * 3600, soft_time_limit=7000
)
def tenant_indexes() -> dict[str, list[str]]:
    """Build the indexes tenants grew into, drop those they left (see ``tenant_indexes``).
    Skips its turn while a reclamation or a rewrite runs."""
    try:
        plan = tenant_indexes_sync(maintenance_work_mem=settings.HNSW_BUILD_MEMORY, wait=False)
    except MaintenanceBusy as exc:
        logger.info("%s", exc)
        return {"created": [], "dropped": []}
    return {
        "created": plan.created,
        "dropped": plan.drop,
    }
