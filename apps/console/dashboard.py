"""What the console's tenant dashboard shows, read in a fixed, small number of queries.

The memory figures are one aggregate (``COUNT(*) FILTER (WHERE ...)``) over the tenant's
records, the other counts one row of scalar subqueries, the review queues counted by their
pages' own functions: the same queries for ten records or a hundred thousand. The charts are
inline SVG drawn on the server from these figures (:func:`bar_chart`), with no script.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from django.db.models import Count, F, Func, IntegerField, Q, QuerySet, Subquery
from django.urls import NoReverseMatch, reverse
from django.utils import timezone

from apps.audit.models import AuditEvent
from apps.audit.selectors import audit_event_recent
from apps.console.context_processors import NAVIGATION
from apps.records.models import SENSITIVITY_ORDER, Trust
from apps.records.selectors import records_live
from apps.review.queues import (
    COUNT_LIMIT,
    PromotionQueueFilters,
    conflict_queue_count,
    promotion_queue_count,
)
from apps.review.throughput import decisions_since
from apps.state.models import ObligationState, RunState
from apps.state.selectors import obligations_list, obligations_overdue, runs_list
from apps.tenancy.models import Membership, Role, Tenant
from apps.tenancy.selectors import credential_list

RECENT_WINDOW = timedelta(days=7)
RECENT_EVENTS = 10
# The expiry horizons the dashboard counts, in days (shortest first).
EXPIRY_HORIZONS: tuple[int, ...] = (7, 30)
TRUST_ORDER: tuple[str, ...] = (Trust.PROVISIONAL, Trust.CONFIRMED)


@dataclass(frozen=True)
class RoleCount:
    role: str
    label: str
    count: int


@dataclass(frozen=True)
class ClassCount:
    """Live memories of one sensitivity class, by trust."""

    sensitivity: str
    provisional: int
    confirmed: int

    @property
    def total(self) -> int:
        return self.provisional + self.confirmed


@dataclass(frozen=True)
class ExpiryCount:
    days: int
    count: int


@dataclass(frozen=True)
class MemoryFigures:
    """The tenant's live memories and what needs attention. Only a fact's current version
    counts: superseded ones are not what the memory holds now, and would inflate every class."""

    by_class: list[ClassCount]
    expiring: list[ExpiryCount]
    open_promotions: int
    open_conflicts: int
    open_runs: int
    pending_obligations: int
    overdue_obligations: int

    @property
    def total(self) -> int:
        return sum(item.total for item in self.by_class)

    @property
    def provisional(self) -> int:
        return sum(item.provisional for item in self.by_class)

    @property
    def confirmed(self) -> int:
        return sum(item.confirmed for item in self.by_class)


@dataclass(frozen=True)
class TenantDashboard:
    """The figures of one tenant's dashboard. Audit figures are ``None`` when the person may
    not browse the audit log: the dashboard must not become a side door to it."""

    members_by_role: list[RoleCount]
    members_total: int
    active_credentials: int
    audit_window_start: datetime
    audit_events_recent: int | None
    latest_events: list[AuditEvent] | None
    memory: MemoryFigures
    # A review lead's figure (None for anyone else): decisions in the last 24 hours.
    review_decisions_day: int | None = None


def count_of(queryset: QuerySet[Any]) -> Subquery:
    """``(SELECT COUNT(*) FROM ...)`` of ``queryset``, to read several counts in one query
    (``Func``, not the ``Count`` aggregate, whose GROUP BY would break the one row)."""
    return Subquery(
        queryset.order_by().values(n=Func(F("pk"), function="COUNT")),
        output_field=IntegerField(),
    )


def _counts_row(
    *, tenant: Tenant, now: datetime, audit_since: datetime | None, review: bool = False
) -> Any:
    """Runs, obligations, members by role, credentials, recent audit events and (for a review
    lead) the day's decisions: one query of scalar subqueries (each uses its table's
    ``(tenant, ...)`` index)."""
    counts: dict[str, Any] = {
        "open_runs": count_of(runs_list(state=RunState.OPEN)),
        "pending_obligations": count_of(obligations_list(state=ObligationState.PENDING)),
        "overdue_obligations": count_of(obligations_overdue(now)),
        "active_credentials": count_of(
            credential_list(tenant=tenant).filter(revoked_at__isnull=True)
        ),
    }
    for role in Role.values:
        counts[f"members_{role}"] = count_of(Membership.objects.filter(tenant=tenant, role=role))
    if audit_since is not None:
        counts["audit_events_recent"] = count_of(
            AuditEvent.objects.filter(tenant=tenant, occurred_at__gte=audit_since)
        )
    if review:
        counts["review_decisions_day"] = count_of(decisions_since(now - timedelta(days=1)))
    return Tenant.objects.filter(pk=tenant.pk).values(**counts).get()


def _class_counts(now: datetime) -> dict[str, int]:
    """Live current memories by trust and sensitivity, and those expiring within each horizon:
    one pass over the tenant's records whatever their number."""
    current = records_live(now).current()
    aggregates: dict[str, Any] = {
        f"{trust}__{sensitivity}": Count("pk", filter=Q(trust=trust, sensitivity=sensitivity))
        for trust in TRUST_ORDER
        for sensitivity in SENSITIVITY_ORDER
    }
    for days in EXPIRY_HORIZONS:
        aggregates[f"expiring_{days}"] = Count(
            "pk", filter=Q(expires_at__gt=now, expires_at__lte=now + timedelta(days=days))
        )
    return current.aggregate(**aggregates)


def _memory_figures(counts: dict[str, int], counts_row: dict[str, int]) -> MemoryFigures:
    return MemoryFigures(
        by_class=[
            ClassCount(sensitivity, *(counts[f"{trust}__{sensitivity}"] for trust in TRUST_ORDER))
            for sensitivity in SENSITIVITY_ORDER
        ],
        expiring=[ExpiryCount(days, counts[f"expiring_{days}"]) for days in EXPIRY_HORIZONS],
        open_promotions=promotion_queue_count(filters=PromotionQueueFilters()),
        open_conflicts=conflict_queue_count(),
        open_runs=counts_row["open_runs"],
        pending_obligations=counts_row["pending_obligations"],
        overdue_obligations=counts_row["overdue_obligations"],
    )


def tenant_dashboard(
    *,
    tenant: Tenant,
    include_audit: bool,
    include_review: bool = False,
    now: datetime | None = None,
) -> TenantDashboard:
    """The dashboard of ``tenant`` (the current tenant context must be ``tenant``), in five
    queries: the record aggregate, the row of counts, the two queue counts (as their pages
    count them) and the latest audit events when the person may see them."""
    now = now or timezone.now()
    window_start = now - RECENT_WINDOW
    counts_row = _counts_row(
        tenant=tenant,
        now=now,
        audit_since=window_start if include_audit else None,
        review=include_review,
    )
    by_role = [
        RoleCount(role, label, counts_row[f"members_{role}"]) for role, label in Role.choices
    ]
    return TenantDashboard(
        members_by_role=by_role,
        members_total=sum(item.count for item in by_role),
        active_credentials=counts_row["active_credentials"],
        audit_window_start=window_start,
        audit_events_recent=counts_row["audit_events_recent"] if include_audit else None,
        latest_events=(
            audit_event_recent(tenant=tenant, limit=RECENT_EVENTS) if include_audit else None
        ),
        memory=_memory_figures(_class_counts(now), counts_row),
        review_decisions_day=counts_row["review_decisions_day"] if include_review else None,
    )


# --- charts -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Bar:
    """One bar of a chart, with its geometry precomputed for the template."""

    label: str
    value: int
    text: str
    url: str | None
    y: int
    width: int
    css_class: str


@dataclass(frozen=True)
class BarChart:
    """A horizontal bar chart: every bar carries its label and value as text, so the chart
    reads without colour and the same figures are in the table next to it."""

    title: str
    bars: list[Bar]
    width: int
    height: int
    label_width: int
    bar_area: int
    bar_height: int

    @property
    def value_x_offset(self) -> int:
        return self.label_width + 6


@dataclass(frozen=True)
class BarSpec:
    label: str
    value: int
    url: str | None = None
    css_class: str = ""
    text: str = ""  # the value as shown, when not simply the number


CHART_WIDTH = 540
CHART_LABEL_WIDTH = 210
CHART_VALUE_ROOM = 70  # room right of the longest bar for its value
CHART_BAR_HEIGHT = 22
CHART_ROW_GAP = 8


def bar_chart(title: str, specs: list[BarSpec]) -> BarChart:
    """Lay out ``specs`` as horizontal bars scaled to the largest value (all-zero: no bars)."""
    bar_area = CHART_WIDTH - CHART_LABEL_WIDTH - CHART_VALUE_ROOM
    largest = max((spec.value for spec in specs), default=0)
    row = CHART_BAR_HEIGHT + CHART_ROW_GAP
    bars = []
    for index, spec in enumerate(specs):
        width = round(bar_area * spec.value / largest) if largest else 0
        if spec.value and width < 2:
            width = 2  # a non-zero value stays visible next to a very large one
        text = spec.text or str(spec.value)
        bars.append(Bar(spec.label, spec.value, text, spec.url, index * row, width, spec.css_class))
    height = max(len(specs) * row - CHART_ROW_GAP, 0)
    return BarChart(title, bars, CHART_WIDTH, height, CHART_LABEL_WIDTH, bar_area, CHART_BAR_HEIGHT)


# --- links and charts for the page --------------------------------------------------------------


def console_url(
    url_name: str, *, tenant_slug: str, perms: frozenset[str], query: dict[str, str] | None = None
) -> str | None:
    """The console page ``url_name`` with ``query``, or None when the person may not open it
    or it is not routed (yet): a figure then shows as plain text instead of a dead link."""

    needed = next((perm for _, _, name, perm in NAVIGATION if name == url_name), None)
    if needed is not None and needed not in perms:
        return None
    try:
        url = reverse(url_name, kwargs={"tenant_slug": tenant_slug})
    except NoReverseMatch:
        return None
    return f"{url}?{urlencode(query)}" if query else url


@dataclass(frozen=True)
class ClassRow:
    """One row of the trust-by-sensitivity table, each figure with its link (or None)."""

    sensitivity: str
    provisional: int
    provisional_url: str | None
    confirmed: int
    confirmed_url: str | None
    total: int
    total_url: str | None


@dataclass(frozen=True)
class AttentionItem:
    key: str
    label: str
    value: int
    url: str | None
    hint: str

    @property
    def text(self) -> str:
        """The value as shown: queue counts stop at ``COUNT_LIMIT`` (one more means more)."""
        return f"{COUNT_LIMIT:,}+" if self.value > COUNT_LIMIT else str(self.value)


@dataclass(frozen=True)
class DashboardPage:
    """Everything the dashboard template draws beyond the raw figures."""

    class_rows: list[ClassRow]
    memories_url: str | None
    provisional_url: str | None
    confirmed_url: str | None
    attention: list[AttentionItem]
    memory_chart: BarChart
    attention_chart: BarChart


def dashboard_page(
    *, tenant: Tenant, perms: frozenset[str], figures: MemoryFigures
) -> DashboardPage:
    """Links and charts for ``figures``, as ``perms`` allows."""

    def link(url_name: str, **query: str) -> str | None:
        return console_url(url_name, tenant_slug=tenant.slug, perms=perms, query=query or None)

    memories = "console:memories"
    # The figures count current versions only, so their lists do too.
    current = {"versions": "current"}
    rows = [
        ClassRow(
            sensitivity=item.sensitivity,
            provisional=item.provisional,
            provisional_url=link(
                memories, trust=Trust.PROVISIONAL, sensitivity=item.sensitivity, **current
            ),
            confirmed=item.confirmed,
            confirmed_url=link(
                memories, trust=Trust.CONFIRMED, sensitivity=item.sensitivity, **current
            ),
            total=item.total,
            total_url=link(memories, sensitivity=item.sensitivity, **current),
        )
        for item in figures.by_class
    ]
    attention = [
        *(
            AttentionItem(
                key=f"expiring-{item.days}",
                label=f"Expiring within {item.days} days",
                value=item.count,
                url=link(memories, expiring_within=str(item.days), **current),
                hint="Live memories whose lifetime ends in this window.",
            )
            for item in figures.expiring
        ),
        AttentionItem(
            key="open-promotions",
            label="Promotion requests to review",
            value=figures.open_promotions,
            url=link("console:review"),
            hint="Provisional memories waiting for a reviewer to confirm or reject them.",
        ),
        AttentionItem(
            key="open-conflicts",
            label="Open conflicts",
            value=figures.open_conflicts,
            url=link("console:conflicts"),
            hint="Contradicting writes waiting for a reviewer to choose the value.",
        ),
        AttentionItem(
            key="overdue-obligations",
            label="Overdue obligations",
            value=figures.overdue_obligations,
            url=link("console:runs", overdue="1"),
            hint="Pending obligations past their deadline.",
        ),
    ]
    memory_chart = bar_chart(
        "Live memories by sensitivity and trust",
        [
            BarSpec(
                label=f"{row.sensitivity.capitalize()}, {trust}",
                value=row.provisional if trust == Trust.PROVISIONAL else row.confirmed,
                url=row.provisional_url if trust == Trust.PROVISIONAL else row.confirmed_url,
                css_class=f"bar-{trust}",
            )
            for row in rows
            for trust in TRUST_ORDER
        ],
    )
    attention_chart = bar_chart(
        "Needs attention",
        [
            BarSpec(item.label, item.value, item.url, "bar-attention", item.text)
            for item in attention
        ],
    )
    return DashboardPage(
        class_rows=rows,
        memories_url=link(memories, **current),
        provisional_url=link(memories, trust=Trust.PROVISIONAL, **current),
        confirmed_url=link(memories, trust=Trust.CONFIRMED, **current),
        attention=attention,
        memory_chart=memory_chart,
        attention_chart=attention_chart,
    )
