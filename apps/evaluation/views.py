"""Console: the Evaluation page (runs, their figures and plots) and Decisions at risk.

Thin views: a form parses, a selector reads within the tenant, a service queues and audits.
A run is a background job (the worker runs it; its page polls its progress until done).
"""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_GET, require_POST

from apps.core.actors import Actor
from apps.tenancy.models import Tenant
from apps.tenancy.permissions import (
    RESOLVE_CONFLICTS,
    REVIEW_PROMOTIONS,
    RUN_EVALUATIONS,
    VIEW_AUDIT,
    VIEW_MEMORIES,
)
from apps.tenancy.views import ConsoleRequest, render_page, tenant_view

from .forms import CHANGE_LABELS, DecisionsAtRiskFilterForm, EvaluationStartForm
from .models import EvaluationRun
from .report import charts, class_rows, rows
from .selectors import (
    DecisionAtRisk,
    decisions_at_risk_page,
    evaluation_run_get,
    evaluation_runs_recent,
)
from .services import evaluation_run_request

AT_RISK_PAGE_SIZE = 50


# --- evaluation runs --------------------------------------------------------------------------


@tenant_view(VIEW_AUDIT, RUN_EVALUATIONS)
@require_GET
def evaluation(request: ConsoleRequest, tenant: Tenant) -> HttpResponse:
    """Past runs, newest first, with the latest finished run's figures; admins start one."""
    runs = evaluation_runs_recent(20)
    latest = next((run for run in runs if run.results), None)
    context: dict[str, Any] = {
        "tenant": tenant,
        "section": "evaluation",
        "runs": runs,
        "latest": latest,
        "can_run": RUN_EVALUATIONS in request.console_perms,
        "form": EvaluationStartForm(),
        **_figures(latest),
    }
    return render_page(request, "evaluation/evaluation.html", context)


@tenant_view(RUN_EVALUATIONS)
@require_POST
def evaluation_start(request: ConsoleRequest, tenant: Tenant) -> HttpResponse:
    form = EvaluationStartForm(request.POST)
    if not form.is_valid():  # a checkbox: only a forged value fails
        raise PermissionDenied("Invalid form.")
    run = evaluation_run_request(
        tenant=tenant,
        actor=Actor.for_user(request.user),
        against_cache=form.cleaned_data["against_cache"],
    )
    messages.success(
        request, "Evaluation queued: the worker runs it in a sandbox; this page follows it."
    )
    return redirect("console:evaluation-run", tenant_slug=tenant.slug, run_id=run.pk)


def _figures(run: EvaluationRun | None) -> dict[str, Any]:
    if run is None or not run.results:
        return {}
    results = run.results
    drawn = charts(results)
    return {
        "rows": rows(results),
        "with_cache": "cache" in results,
        "class_rows": class_rows(results),
        # Drawn by apps.evaluation.report from numbers, every text escaped there.
        "charts": {name: mark_safe(svg) for name, svg in drawn.items()},  # noqa: S308
        "results": results,
    }


@tenant_view(VIEW_AUDIT, RUN_EVALUATIONS)
@require_GET
def evaluation_run(request: ConsoleRequest, tenant: Tenant, run_id: uuid.UUID) -> HttpResponse:
    """One run: its progress while it runs (htmx polls this), then its figures and plots."""
    run = evaluation_run_get(run_id)
    if run is None:
        raise Http404("No such evaluation run")
    context = {"tenant": tenant, "section": "evaluation", "run": run, **_figures(run)}
    return render_page(request, "evaluation/run.html", context, partial="run_status")


# --- decisions at risk ------------------------------------------------------------------------


def _links(tenant: Tenant, item: DecisionAtRisk, perms: frozenset[str]) -> dict[str, Any]:
    """Where each part of a decision at risk is shown in the console (for those who may)."""
    memory_url = None
    if item.subject and VIEW_MEMORIES in perms:
        memory_url = reverse("console:memory", args=[tenant.slug, item.memory_id])
    audit, audit_url = reverse("console:audit", args=[tenant.slug]), None
    if VIEW_AUDIT in perms:
        audit_url = f"{audit}?{urlencode({'action': 'search.decision', 'before': item.seq + 1})}"
    changes = []
    for change in item.changes:
        url = None
        if "superseded_by" in change.detail and VIEW_MEMORIES in perms:
            url = reverse("console:memory", args=[tenant.slug, change.detail["superseded_by"]])
        elif "receipt" in change.detail and VIEW_AUDIT in perms:
            url = reverse("console:deletion", args=[tenant.slug, change.detail["receipt"]])
        elif "conflict" in change.detail and RESOLVE_CONFLICTS in perms:
            url = reverse("console:conflict", args=[tenant.slug, change.detail["conflict"]])
        elif "audit_event" in change.detail and VIEW_AUDIT in perms:
            url = f"{audit}?{urlencode({'object_id': item.memory_id})}"
        changes.append({"change": change, "label": CHANGE_LABELS[change.kind], "url": url})
    return {"item": item, "memory_url": memory_url, "audit_url": audit_url, "changes": changes}


@tenant_view(REVIEW_PROMOTIONS, RESOLVE_CONFLICTS, VIEW_AUDIT)
@require_GET
def decisions_at_risk(request: ConsoleRequest, tenant: Tenant) -> HttpResponse:
    """Past decision searches that returned a memory which has changed since, newest first,
    filterable, each linked to the memory, the change and the search's audit event."""
    form = DecisionsAtRiskFilterForm(request.GET or None)
    items: list[dict[str, Any]] = []
    next_url = None
    # A filter that is wrong lists nothing: the page says which it is.
    if not form.is_bound or form.is_valid():
        after = form.cleaned_data.get("cursor") if form.is_bound else None
        found = decisions_at_risk_page(
            filters=form.filters(), after=after, limit=AT_RISK_PAGE_SIZE + 1
        )
        if len(found) > AT_RISK_PAGE_SIZE:
            found = found[:AT_RISK_PAGE_SIZE]
            query = request.GET.copy()
            query["cursor"] = found[-1].cursor.token()
            next_url = f"{request.path}?{query.urlencode()}"
        items = [_links(tenant, item, request.console_perms) for item in found]
    first_url = None
    if request.GET.get("cursor"):
        query = request.GET.copy()
        query.pop("cursor")
        first_url = f"{request.path}?{query.urlencode()}" if query else request.path
    context = {
        "tenant": tenant,
        "section": "decisions-at-risk",
        "filter_form": form,
        "filtered": form.is_bound and form.filtered(),
        "items": items,
        "next_url": next_url,
        "first_url": first_url,
    }
    return render_page(
        request, "evaluation/decisions_at_risk.html", context, partial="at_risk_results"
    )
