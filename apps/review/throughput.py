"""Reviewers' throughput, for a review lead: who decided how much, and how fast.

Read from the audit log: a decision later reversed still counts as the work it was (the
reversal counts as a reversal), a bulk decision counts each request. One grouped query, on
the ``(tenant, action, seq)`` index.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Count, Max, Q, QuerySet
from django.db.models.functions import TruncHour
from django.utils import timezone

from apps.audit.models import AuditEvent

APPROVALS = ("promotion.approve",)
REJECTIONS = ("promotion.reject",)
RESOLUTIONS = ("conflict.resolve",)
REVERSALS = ("promotion.return_to_provisional", "promotion.reopen")
DECISIONS = APPROVALS + REJECTIONS + RESOLUTIONS
# The windows a lead compares: the last hour, the last day, the last week.
WINDOW = timedelta(days=7)


@dataclass(frozen=True)
class ReviewerThroughput:
    """One reviewer's decisions (approvals, rejections and conflict resolutions)."""

    actor_type: str
    actor_id: str
    label: str
    last_hour: int
    last_day: int
    last_week: int
    approvals: int
    rejections: int
    resolutions: int
    reversals: int
    active_hours: int
    last_decided_at: datetime | None

    @property
    def per_active_hour(self) -> float:
        """Decisions per hour in which the reviewer decided anything this week: their pace
        while reviewing, not diluted by the hours they were away."""
        return self.last_week / self.active_hours if self.active_hours else 0.0


def review_throughput(*, now: datetime | None = None) -> list[ReviewerThroughput]:
    """Each person's or credential's decisions in the current tenant over the last hour, day
    and week, busiest this week first."""
    now = now or timezone.now()
    since = now - WINDOW
    decided = Q(action__in=DECISIONS)
    rows = (
        AuditEvent.objects.filter(action__in=DECISIONS + REVERSALS, occurred_at__gte=since)
        .order_by()
        .values("actor_type", "actor_id")
        .annotate(
            label=Max("actor_label"),
            last_hour=Count("id", filter=decided & Q(occurred_at__gte=now - timedelta(hours=1))),
            last_day=Count("id", filter=decided & Q(occurred_at__gte=now - timedelta(days=1))),
            last_week=Count("id", filter=decided),
            approvals=Count("id", filter=Q(action__in=APPROVALS)),
            rejections=Count("id", filter=Q(action__in=REJECTIONS)),
            resolutions=Count("id", filter=Q(action__in=RESOLUTIONS)),
            reversals=Count("id", filter=Q(action__in=REVERSALS)),
            active_hours=Count(TruncHour("occurred_at"), filter=decided, distinct=True),
            last_decided_at=Max("occurred_at", filter=decided),
        )
        .order_by("-last_week", "label")
    )
    return [ReviewerThroughput(**row) for row in rows]


def decisions_since(since: datetime) -> QuerySet[AuditEvent]:
    """The decisions the current tenant's reviewers took since ``since`` (counted on the
    dashboard for a lead; the throughput page breaks them down)."""
    return AuditEvent.objects.filter(action__in=DECISIONS, occurred_at__gte=since)
