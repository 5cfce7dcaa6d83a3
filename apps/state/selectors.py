"""Reads of runs, episodes, checkpoints and obligations (row-level security applies the
tenant; ids that do not parse are simply not found)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db.models import OuterRef, QuerySet, Subquery
from django.db.models.functions import Greatest
from django.utils import timezone

from apps.tenancy.selectors import parse_uuid

from .models import Checkpoint, Episode, Obligation, ObligationState, Run, RunState


def run_get(run_id: Any) -> Run | None:
    pk = parse_uuid(run_id)
    return Run.objects.filter(pk=pk).first() if pk else None


def runs_list(*, task_id: str = "", state: str = "") -> QuerySet[Run]:
    runs = Run.objects.all()
    if task_id:
        runs = runs.filter(task_id=task_id)
    if state:
        runs = runs.filter(state=state)
    return runs


def runs_idle(*, idle_for: timedelta, now: datetime | None = None) -> QuerySet[Run]:
    """Open runs whose last activity (opening, latest episode, latest checkpoint) is more than
    ``idle_for`` ago, annotated with ``last_activity_at``, longest idle first.

    The latest episode is the one numbered ``last_seq`` and the latest checkpoint the highest
    step (both are written in order under the run's lock), so each is one index lookup."""
    now = now or timezone.now()
    latest_episode = Episode.objects.filter(
        tenant_id=OuterRef("tenant_id"), run_id=OuterRef("pk"), seq=OuterRef("last_seq")
    ).values("created_at")[:1]
    latest_checkpoint = (
        Checkpoint.objects.filter(tenant_id=OuterRef("tenant_id"), run_id=OuterRef("pk"))
        .order_by("-step")
        .values("created_at")[:1]
    )
    # PostgreSQL's GREATEST skips NULLs: a run without episodes or checkpoints counts from
    # its opening.
    return (
        Run.objects.filter(state=RunState.OPEN)
        .annotate(
            last_activity_at=Greatest(
                "opened_at", Subquery(latest_episode), Subquery(latest_checkpoint)
            )
        )
        .filter(last_activity_at__lt=now - idle_for)
        .order_by("last_activity_at", "id")
    )


def episodes_list(run: Run) -> QuerySet[Episode]:
    """The run's episodes in order (none once it is closed)."""
    return Episode.objects.filter(tenant_id=run.tenant_id, run=run).order_by("seq")


def checkpoint_latest(run: Run) -> Checkpoint | None:
    return Checkpoint.objects.filter(tenant_id=run.tenant_id, run=run).order_by("-step").first()


def obligation_get(obligation_id: Any) -> Obligation | None:
    pk = parse_uuid(obligation_id)
    return Obligation.objects.filter(pk=pk).first() if pk else None


def obligations_overdue(now: datetime | None = None) -> QuerySet[Obligation]:
    """Pending obligations past their deadline, most overdue first (for agents and the
    console). Overdue is computed at read time; nothing sweeps or changes them."""
    now = now or timezone.now()
    return Obligation.objects.filter(
        state=ObligationState.PENDING, deadline__isnull=False, deadline__lt=now
    ).order_by("deadline", "id")


def obligations_list(
    *, task_id: str = "", state: str = "", overdue: bool | None = None, now: datetime | None = None
) -> QuerySet[Obligation]:
    """The tenant's obligations, filtered; ``overdue=True`` keeps pending ones past their
    deadline, ``overdue=False`` excludes them."""
    now = now or timezone.now()
    obligations = Obligation.objects.all()
    if task_id:
        obligations = obligations.filter(task_id=task_id)
    if state:
        obligations = obligations.filter(state=state)
    if overdue is True:
        obligations = obligations.filter(state=ObligationState.PENDING, deadline__lt=now)
    elif overdue is False:
        obligations = obligations.exclude(state=ObligationState.PENDING, deadline__lt=now)
    return obligations


def is_overdue(obligation: Obligation, now: datetime | None = None) -> bool:
    now = now or timezone.now()
    return (
        obligation.state == ObligationState.PENDING
        and obligation.deadline is not None
        and obligation.deadline < now
    )
