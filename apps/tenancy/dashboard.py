"""What the console's tenant dashboard shows, read in a fixed, small number of queries.

The dashboard grows with the product (memory counts, open reviews and conflicts, expiring
items): each app adds its figures here as another field of :class:`TenantDashboard`, read by
its own selector, so the view and the template stay thin.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils import timezone

from apps.audit.models import AuditEvent

from .models import Role, Tenant
from .selectors import (
    audit_event_count_since,
    audit_event_recent,
    credential_list,
    membership_counts_by_role,
)

RECENT_WINDOW = timedelta(days=7)
RECENT_EVENTS = 10


@dataclass(frozen=True)
class RoleCount:
    role: str
    label: str
    count: int


@dataclass(frozen=True)
class TenantDashboard:
    """The figures of one tenant's dashboard.

    Audit figures are ``None`` when the person may not browse the audit log: the dashboard
    must not become a side door to it.
    """

    members_by_role: list[RoleCount]
    members_total: int
    active_credentials: int
    audit_window_start: datetime
    audit_events_recent: int | None
    latest_events: list[AuditEvent] | None


def tenant_dashboard(
    *, tenant: Tenant, include_audit: bool, now: datetime | None = None
) -> TenantDashboard:
    """The dashboard of ``tenant`` (the current tenant context must be ``tenant``)."""
    window_start = (now or timezone.now()) - RECENT_WINDOW
    counts = membership_counts_by_role(tenant=tenant)
    by_role = [RoleCount(role, label, counts.get(role, 0)) for role, label in Role.choices]
    return TenantDashboard(
        members_by_role=by_role,
        members_total=sum(item.count for item in by_role),
        active_credentials=credential_list(tenant=tenant).filter(revoked_at__isnull=True).count(),
        audit_window_start=window_start,
        audit_events_recent=(
            audit_event_count_since(tenant=tenant, since=window_start) if include_audit else None
        ),
        latest_events=(
            audit_event_recent(tenant=tenant, limit=RECENT_EVENTS) if include_audit else None
        ),
    )
