"""Reads of the outbox: how its work is going."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Count, Min, Q
from django.utils import timezone

from apps.tenancy.context import tenant_scope
from apps.tenancy.models import Tenant

from .models import OutboxMessage, OutboxState


@dataclass(frozen=True)
class BackgroundWork:
    """How the outbox's work is going, across every tenant (figures only, no row)."""

    waiting: int  # pending or published, not finished
    oldest_waiting_seconds: float | None
    done_last_minute: int
    dead: int


def background_work(now: datetime | None = None) -> BackgroundWork:
    """Figures of the outbox across tenants, read one tenant at a time under its own scope
    (outbox rows are tenant rows: there is no tenant-less way to see them)."""

    now = now or timezone.now()
    waiting = done = dead = 0
    oldest: datetime | None = None
    unfinished = Q(state__in=[OutboxState.PENDING, OutboxState.PUBLISHED])
    for tenant_id in Tenant.objects.values_list("pk", flat=True):
        with tenant_scope(tenant_id):
            figures = OutboxMessage.objects.aggregate(
                waiting=Count("pk", filter=unfinished),
                oldest=Min("created_at", filter=unfinished),
                done=Count(
                    "pk",
                    filter=Q(state=OutboxState.DONE, finished_at__gte=now - timedelta(minutes=1)),
                ),
                dead=Count("pk", filter=Q(state=OutboxState.DEAD)),
            )
        waiting += figures["waiting"]
        done += figures["done"]
        dead += figures["dead"]
        if figures["oldest"] is not None and (oldest is None or figures["oldest"] < oldest):
            oldest = figures["oldest"]
    return BackgroundWork(
        waiting=waiting,
        oldest_waiting_seconds=(now - oldest).total_seconds() if oldest else None,
        done_last_minute=done,
        dead=dead,
    )
