"""Console: the tenant's runs (with their latest checkpoint) and obligations, read-only.
Overdue obligations come first, marked in words, not only in colour; so are blocked ones
(pending, but waiting on a failed or cancelled obligation, so never committable)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import OuterRef, QuerySet, Subquery
from django.http import HttpResponse
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET

from apps.core.pagination import Cursor
from apps.tenancy.models import Tenant
from apps.tenancy.permissions import VIEW_MEMORIES
from apps.tenancy.views import ConsoleRequest, render_page, tenant_view

from .forms import RunsFilterForm
from .models import Checkpoint, Obligation, Run
from .selectors import (
    is_overdue,
    never_committable_below,
    obligations_blocked,
    obligations_list,
    obligations_overdue,
    runs_list,
)

PAGE_SIZE = 25
OVERDUE_SHOWN = 10
BLOCKED_SHOWN = 10


@dataclass(frozen=True)
class ObligationRow:
    obligation: Obligation
    overdue: bool
    # Pending but never committable: the failed or cancelled obligations it waits on.
    blocked_by: tuple[Obligation, ...] = ()


@dataclass(frozen=True)
class Page:
    rows: list[Any]
    next_url: str | None


def _with_latest_step(runs: QuerySet[Run]) -> QuerySet[Run]:
    """Each run with the step of its latest checkpoint (None before the first), read through
    the (tenant, run, step) unique index: one query for the whole page."""
    latest = (
        Checkpoint.objects.filter(tenant_id=OuterRef("tenant_id"), run_id=OuterRef("pk"))
        .order_by("-step")
        .values("step")[:1]
    )
    return runs.annotate(latest_step=Subquery(latest))


def _page(rows: QuerySet[Any], column: str, cursor: Cursor | None, next_url: Any) -> Page:
    """The rows after ``cursor`` in ``(-column, -id)`` order (keyset: no OFFSET), and the
    next page's link."""
    if cursor is not None:
        rows = rows.filter(cursor.older(column))
    found = list(rows.order_by(f"-{column}", "-id")[: PAGE_SIZE + 1])
    if len(found) <= PAGE_SIZE:
        return Page(found, None)
    last = found[PAGE_SIZE - 1]
    return Page(found[:PAGE_SIZE], next_url(Cursor(getattr(last, column), last.pk).token()))


def _obligation_rows(items: list[Obligation], now: datetime) -> list[ObligationRow]:
    """The page's obligations, each marked overdue and (when pending and waiting on a failed
    or cancelled obligation) blocked."""
    waiting = [item.pk for item in items if item.state == "pending" and item.depends_on]
    causes_of = never_committable_below(waiting)
    causes = Obligation.objects.in_bulk(list({pk for ids in causes_of.values() for pk in ids}))
    return [
        ObligationRow(
            item,
            is_overdue(item, now),
            tuple(causes[pk] for pk in causes_of.get(item.pk, ()) if pk in causes),
        )
        for item in items
    ]


def _runs_context(request: ConsoleRequest, tenant: Tenant, now: datetime) -> dict[str, Any]:
    form = RunsFilterForm(request.GET or None)
    base = reverse("console:runs", kwargs={"tenant_slug": tenant.slug})
    context: dict[str, Any] = {
        "tenant": tenant,
        "section": "runs",
        "filter_form": form,
        "filtered": form.is_bound
        and any(request.GET.get(name) for name in RunsFilterForm.FILTER_FIELDS),
        "base_url": base,
        "now": now,
    }
    if form.is_bound and not form.is_valid():
        return context
    data = form.cleaned_data if form.is_bound else {}
    task_id = data.get("task_id") or ""

    runs = _with_latest_step(runs_list(task_id=task_id, state=data.get("run_state") or ""))
    runs_page = _page(
        runs,
        "opened_at",
        data.get("runs_after"),
        lambda cursor: f"{base}?{form.query_for(runs_after=cursor)}#runs-heading",
    )
    obligations = obligations_list(
        task_id=task_id,
        state=data.get("state") or "",
        overdue=True if data.get("overdue") else None,
        now=now,
    )
    obligations_page = _page(
        obligations,
        "created_at",
        data.get("obligations_after"),
        lambda cursor: f"{base}?{form.query_for(obligations_after=cursor)}#obligations-heading",
    )
    overdue = obligations_overdue(now)
    if task_id:
        overdue = overdue.filter(task_id=task_id)
    overdue_shown = list(overdue[: OVERDUE_SHOWN + 1])
    blocked_shown = obligations_blocked(task_id=task_id, limit=BLOCKED_SHOWN + 1)
    context.update(
        runs=runs_page,
        obligations=Page(_obligation_rows(obligations_page.rows, now), obligations_page.next_url),
        overdue=overdue_shown[:OVERDUE_SHOWN],
        overdue_more=len(overdue_shown) > OVERDUE_SHOWN,
        blocked=blocked_shown[:BLOCKED_SHOWN],
        blocked_more=len(blocked_shown) > BLOCKED_SHOWN,
        overdue_url=f"{base}?{form.query_for(overdue='on', state='', obligations_after='')}"
        "#obligations-heading",
        paged=bool(data.get("runs_after") or data.get("obligations_after")),
    )
    return context


@tenant_view(VIEW_MEMORIES)
@require_GET
def runs(request: ConsoleRequest, tenant: Tenant) -> HttpResponse:
    """Runs (open and closed, with their latest checkpoint) and obligations, filtered by task,
    state and overdue, each list paged by keyset; overdue obligations first."""
    return render_page(
        request,
        "console/state/runs.html",
        _runs_context(request, tenant, timezone.now()),
        partial="results",
    )
