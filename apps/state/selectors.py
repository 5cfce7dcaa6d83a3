"""Reads of runs, episodes, checkpoints and obligations (row-level security applies the
tenant; ids that do not parse are simply not found)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import connection
from django.db.models import OuterRef, QuerySet, Subquery
from django.db.models.functions import Greatest
from django.utils import timezone

from apps.tenancy.models import Tenant
from apps.tenancy.selectors import parse_uuid

from .models import Checkpoint, Episode, Obligation, ObligationState, Run, RunState


def run_get(run_id: Any) -> Run | None:
    pk = parse_uuid(run_id)
    return Run.objects.filter(pk=pk).first() if pk else None


def run_open_locked(tenant: Tenant, run_id: uuid.UUID) -> bool:
    """Whether ``run_id`` is an open run of ``tenant``; the run, if any, stays locked until
    the caller's transaction ends (a close locks it too). The records write path asks this of
    a ``session``-retained write (received in apps/state/receivers.py)."""
    state = (
        Run.objects.select_for_update(no_key=True)
        .filter(tenant=tenant, pk=run_id)
        .values_list("state", flat=True)
        .first()
    )
    return state == RunState.OPEN


def runs_list(*, task_id: str = "", state: str = "") -> QuerySet[Run]:
    return Run.objects.filter(**_given(task_id=task_id, state=state))


def _given(**filters: str) -> dict[str, str]:
    """The filters that were given (an empty one filters nothing)."""
    return {name: value for name, value in filters.items() if value}


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
    return obligations_list(overdue=True, now=now).order_by("deadline", "id")


def obligations_list(
    *, task_id: str = "", state: str = "", overdue: bool | None = None, now: datetime | None = None
) -> QuerySet[Obligation]:
    """The tenant's obligations, filtered; ``overdue=True`` keeps pending ones past their
    deadline, ``overdue=False`` excludes them."""
    now = now or timezone.now()
    obligations = Obligation.objects.filter(**_given(task_id=task_id, state=state))
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


# From each root, down through pending obligations only (a committed one is done; a failed or
# cancelled one is where the chain breaks), to the failed or cancelled obligations below it.
NEVER_COMMITTABLE_BELOW_SQL = """
WITH RECURSIVE reach(root, id) AS (
    SELECT root, root FROM unnest(%s::uuid[]) AS root
  UNION
    SELECT reach.root, dependency
      FROM reach
      JOIN state_obligation o ON o.id = reach.id AND o.state = 'pending',
           unnest(o.depends_on) AS dependency
)
SELECT reach.root, array_agg(DISTINCT ended.id)
  FROM reach JOIN state_obligation ended ON ended.id = reach.id
 WHERE ended.state IN ('failed', 'cancelled')
 GROUP BY reach.root
"""

# Up from every failed or cancelled obligation, through pending obligations depending on it.
BLOCKED_SQL = """
WITH RECURSIVE blocked(id, cause) AS (
    SELECT o.id, ended.id
      FROM state_obligation ended
      JOIN state_obligation o
        ON o.tenant_id = ended.tenant_id AND ended.id = ANY (o.depends_on)
     WHERE ended.state IN ('failed', 'cancelled') AND o.state = 'pending'
  UNION
    SELECT o.id, blocked.cause
      FROM blocked JOIN state_obligation o ON blocked.id = ANY (o.depends_on)
     WHERE o.state = 'pending'
)
SELECT id, array_agg(DISTINCT cause) FROM blocked GROUP BY id
"""


def never_committable_below(ids: list[Any]) -> dict[Any, list[Any]]:
    """For each of ``ids`` that can never be committed because of what it depends on: the
    failed or cancelled obligations it waits on, directly or through pending ones. An id that
    is itself failed or cancelled maps to itself."""
    if not ids:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(NEVER_COMMITTABLE_BELOW_SQL, [list(ids)])
        return {root: list(causes) for root, causes in cursor.fetchall()}


@dataclass(frozen=True)
class BlockedObligation:
    """A pending obligation that can never be committed, and the failed or cancelled
    obligations it waits on."""

    obligation: Obligation
    causes: list[Obligation]


def obligations_blocked(*, task_id: str = "", limit: int = 100) -> list[BlockedObligation]:
    """The tenant's pending obligations with a failed or cancelled dependency, directly or
    through other pending ones, oldest first: they can only be failed or cancelled now."""
    with connection.cursor() as cursor:
        cursor.execute(BLOCKED_SQL)
        causes_of = {pk: list(causes) for pk, causes in cursor.fetchall()}
    if not causes_of:
        return []
    blocked = Obligation.objects.filter(pk__in=list(causes_of)).order_by("created_at", "id")
    if task_id:
        blocked = blocked.filter(task_id=task_id)
    found = list(blocked[:limit])
    cause_ids = {pk for item in found for pk in causes_of[item.pk]}
    causes = Obligation.objects.in_bulk(list(cause_ids))
    return [
        BlockedObligation(
            item,
            sorted(
                (causes[pk] for pk in causes_of[item.pk] if pk in causes),
                key=lambda cause: (cause.created_at, str(cause.pk)),
            ),
        )
        for item in found
    ]
