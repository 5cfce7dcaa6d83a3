"""Console: the conflict queue, as for promotion requests (:mod:`.decisions`): compact rows,
grouped, shared out by claims, resolved together after a confirmation that lists each one.
The services refuse a resolution someone else holds, so the console, the bulk flow and the
API meet the same refusal. htmx answers redraw the conflict in place; without JavaScript
every form posts and redirects back to the queue.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.core.actors import Actor
from apps.records.models import Conflict, ConflictState, Resolution
from apps.records.services import RecordError
from apps.review.claims import (
    CONFLICTS,
    claims_held_count,
    item_label,
)
from apps.review.forms import (
    ConflictBulkForm,
    ConflictClaimBatchForm,
    ConflictClaimForm,
    ConflictQueueForm,
    ConflictResolveForm,
    ConflictSelectionForm,
)
from apps.review.queues import (
    BULK_APPROVE_LIMIT,
    CONFLICT_PAGE_SIZE,
    ClaimFilter,
    ConflictGroup,
    ConflictOrder,
    conflict_get,
    conflict_queue_count,
    conflict_queue_groups,
    conflict_queue_page,
    conflict_queue_selection,
    conflicts_resolve_bulk,
    group_filter,
)
from apps.review.services import conflict_resolve
from apps.review.views.claims import claim_batch, claims_change, release_all
from apps.review.views.decisions import (
    _reviewer_context,
    _safe_next,
    group_rows,
    listed,
    queue_context,
    queue_counts,
    reviewer_id,
    say_errors,
    shown_query,
    snapshot,
    with_query,
)
from apps.tenancy.models import Tenant
from apps.tenancy.permissions import RESOLVE_CONFLICTS
from apps.tenancy.views import (
    ConsoleRequest,
    form_nonce_consume,
    render_page,
    tenant_view,
)

CONFLICTS_TEMPLATE = "console/review/conflicts.html"
CONFLICT_TEMPLATE = "console/review/conflict.html"
BULK_RESOLVE_TEMPLATE = "console/review/bulk_resolve.html"
RESOLVED_AS = {
    Resolution.KEEP_CURRENT: "kept the current value",
    Resolution.ACCEPT_NEW: "accepted the new value",
    Resolution.CORRECTED: "wrote a corrected value",
}


def _queue_url(tenant: Tenant) -> str:
    return reverse("console:conflicts", kwargs={"tenant_slug": tenant.slug})


def conflict_filter_form(request: ConsoleRequest, data: Any) -> ConflictQueueForm:
    return ConflictQueueForm(data or None, reviewer_id=reviewer_id(request))


def _filtered_url(tenant: Tenant, form: ConflictQueueForm, **extra: str) -> str:
    return with_query(_queue_url(tenant), form.query_for() if form.is_valid() else "", **extra)


# --- the queue ------------------------------------------------------------------------------


def _conflicts_context(request: ConsoleRequest, tenant: Tenant) -> dict[str, Any]:
    form = conflict_filter_form(request, request.GET)
    page = None
    groups = None
    count = 0
    paged_on = False
    if not form.is_bound or form.is_valid():
        cursors = form.cleaned_data if form.is_bound else {}
        filters = form.filters()
        if form.grouping:
            groups = conflict_queue_groups(filters=filters, by=form.grouping)
        else:
            page = conflict_queue_page(
                filters=filters,
                order=form.order,
                after=cursors.get("after"),
                before=cursors.get("before") if form.order == ConflictOrder.OLDEST else None,
                size=CONFLICT_PAGE_SIZE,
            )
            paged_on = form.order != ConflictOrder.OLDEST and cursors.get("after") is not None
        count = conflict_queue_count(filters=filters)
    return {
        **queue_context(request, tenant, "conflicts", _queue_url(tenant), form, page),
        "pager_form": form,
        "groups": _group_rows(tenant, form, groups) if groups is not None else None,
        "count": count,
        "paged_on": paged_on,
        "resolve_form": None,
        "claims_held": claims_held_count(holder_id=reviewer_id(request), kind=CONFLICTS),
        "claim_batch_size": 20,
        "mine_url": _filtered_url(tenant, form, claim=ClaimFilter.MINE),
    }


def _group_rows(tenant: Tenant, form: ConflictQueueForm, groups: Any) -> dict[str, Any]:
    return group_rows(
        form,
        groups,
        queue_url=_queue_url(tenant),
        bulk_url=reverse("console:conflicts-bulk-resolve", kwargs={"tenant_slug": tenant.slug}),
        selector=group_filter(groups.by),
        by_label=ConflictGroup(groups.by).label.lower(),
        decisions={
            "keep_url": f"resolution={Resolution.KEEP_CURRENT}&",
            "accept_url": f"resolution={Resolution.ACCEPT_NEW}&",
        },
    )


@tenant_view(RESOLVE_CONFLICTS)
@require_GET
def conflicts(request: ConsoleRequest, tenant: Tenant) -> HttpResponse:
    """Open conflicts, oldest first, one compact row each (both versions, their provenance
    and the history a click away), or grouped."""
    return render_page(
        request, CONFLICTS_TEMPLATE, _conflicts_context(request, tenant), partial="results"
    )


def _conflict_or_404(conflict_id: uuid.UUID) -> Conflict:
    found = conflict_get(conflict_id)
    if found is None:
        raise Http404("No such conflict")
    return found


def _conflict_context(
    request: ConsoleRequest, tenant: Tenant, conflict: Conflict, **extra: Any
) -> dict[str, Any]:
    queue_url = _queue_url(tenant)
    return {
        **_reviewer_context(request, tenant, "conflicts"),
        "conflict": conflict,
        "next_url": _safe_next(request, queue_url) if request.method == "POST" else queue_url,
        # The conflict's own page opens the versions and the history; an item replaced in
        # the queue keeps the queue's compact form.
        "full_history": not request.htmx,
        **extra,
    }


@tenant_view(RESOLVE_CONFLICTS)
@require_GET
def conflict_detail(
    request: ConsoleRequest, tenant: Tenant, conflict_id: uuid.UUID
) -> HttpResponse:
    """One conflict with the fact's whole history (up to the history limit)."""
    conflict = _conflict_or_404(conflict_id)
    return render(request, CONFLICT_TEMPLATE, _conflict_context(request, tenant, conflict))


def _resolve_answer(
    request: ConsoleRequest,
    tenant: Tenant,
    conflict: Conflict,
    *,
    form: ConflictResolveForm | None = None,
) -> HttpResponse:
    context = _conflict_context(request, tenant, conflict, resolve_form=form)
    if request.htmx:
        shown = conflict_filter_form(request, shown_query(request, _queue_url(tenant)))
        context.update(queue_counts(request, shown.filters(), conflict_queue_count, CONFLICTS))
        return render(request, f"{CONFLICTS_TEMPLATE}#item_response", context)
    if form is not None and form.errors:
        return render(request, CONFLICT_TEMPLATE, context, status=400)
    return redirect(_safe_next(request, _queue_url(tenant)))


@tenant_view(RESOLVE_CONFLICTS)
@require_POST
def conflict_resolve_view(
    request: ConsoleRequest, tenant: Tenant, conflict_id: uuid.UUID
) -> HttpResponse:
    """Keep the current value, accept the new one, or write a corrected value; the losing
    version is superseded, never deleted. A bad corrected value changes nothing, and neither
    does a resolution of a conflict someone else holds (the refusal names them)."""
    conflict = _conflict_or_404(conflict_id)
    form = ConflictResolveForm(request.POST)
    if not form.is_valid():
        return _resolve_answer(request, tenant, conflict, form=form)
    label = item_label(conflict)
    resolution = form.cleaned_data["resolution"]
    try:
        conflict_resolve(
            conflict=conflict,
            actor=Actor.for_user(request.user),
            resolution=resolution,
            reason=form.cleaned_data["reason"],
            value=form.cleaned_data["parsed_value"],
        )
    except RecordError as error:
        if "resolution" in error.extra:
            # A repeated click, or another reviewer resolved it first: show that resolution.
            messages.info(request, f"{label}: {error}")
            return _resolve_answer(request, tenant, _conflict_or_404(conflict_id))
        field = error.field
        form.add_error(field if field in form.fields else None, str(error))
        # Refused (a claim taken meanwhile, say): redrawn as it stands now, with why.
        return _resolve_answer(request, tenant, _conflict_or_404(conflict_id), form=form)
    messages.success(
        request, f"Resolved {label}: {RESOLVED_AS[resolution]}. The other version is superseded."
    )
    return _resolve_answer(request, tenant, _conflict_or_404(conflict_id))


# --- claims ---------------------------------------------------------------------------------


def _claimed_items(request: ConsoleRequest, tenant: Tenant, ids: list[uuid.UUID]) -> HttpResponse:
    """The claimed (or released) conflicts redrawn out of band, with the messages."""
    items = [found for pk in ids if (found := conflict_get(pk)) is not None]
    context = {
        **_reviewer_context(request, tenant, "conflicts"),
        "rows": [item for item in items if item.state == ConflictState.OPEN],
        "next_url": _safe_next(request, _queue_url(tenant)),
        "full_history": False,
        "claims_held": claims_held_count(holder_id=reviewer_id(request), kind=CONFLICTS),
    }
    return render(request, f"{CONFLICTS_TEMPLATE}#claimed_response", context)


@tenant_view(RESOLVE_CONFLICTS)
@require_POST
def conflict_claim(request: ConsoleRequest, tenant: Tenant) -> HttpResponse:
    """Claim (or release) the conflicts posted: one row's, or the ticked ones. A conflict
    someone else holds stays theirs, and the answer says so."""
    form = ConflictClaimForm(request.POST)
    back = _safe_next(request, _queue_url(tenant))
    ids: list[uuid.UUID] = []
    if not form.is_valid():
        say_errors(request, form)
    else:
        ids = form.cleaned_data["conflicts"]
        claiming = form.cleaned_data["action"] == "claim"
        claims_change(request, tenant, ids, claiming=claiming, kind=CONFLICTS)
    if request.htmx:
        return _claimed_items(request, tenant, ids)
    return redirect(back)


@tenant_view(RESOLVE_CONFLICTS)
@require_POST
def conflict_claim_batch(request: ConsoleRequest, tenant: Tenant) -> HttpResponse:
    """Claim the next open conflicts the queue's filters match that no one else holds."""
    form = ConflictClaimBatchForm(request.POST, reviewer_id=reviewer_id(request))
    return claim_batch(request, tenant, form, _queue_url(tenant), conflict_queue_selection)


@tenant_view(RESOLVE_CONFLICTS)
@require_POST
def conflict_release_all(request: ConsoleRequest, tenant: Tenant) -> HttpResponse:
    """Let go of every conflict the reviewer holds."""
    return release_all(request, tenant, _queue_url(tenant), CONFLICTS)


# --- resolving together ---------------------------------------------------------------------


def _bulk_page(
    request: ConsoleRequest,
    tenant: Tenant,
    filter_form: ConflictQueueForm,
    *,
    batch: list[Conflict],
    form: ConflictBulkForm,
    selection: bool,
    status: int = 200,
) -> HttpResponse:
    count = conflict_queue_count(filters=filter_form.filters(), limit=BULK_APPROVE_LIMIT)
    context = {
        **_reviewer_context(request, tenant, "conflicts"),
        "filter_summary": filter_form.filter_summary(),
        "batch": batch,
        "count": len(batch),
        "more_than_limit": not selection and count > BULK_APPROVE_LIMIT,
        "bulk_limit": BULK_APPROVE_LIMIT,
        "queue_url": _filtered_url(tenant, filter_form),
        "form": form,
        "selection": selection,
    }
    return render(request, BULK_RESOLVE_TEMPLATE, context, status=status)


def _bulk_confirmation(
    request: ConsoleRequest,
    tenant: Tenant,
    filter_form: ConflictQueueForm,
    *,
    resolution: str,
    only: list[uuid.UUID] | None = None,
) -> HttpResponse:
    """The confirmation: the open conflicts the filters select now (or which of the ticked
    ones they still select), every one listed, as a snapshot of ids to resolve."""
    batch = conflict_queue_selection(
        filters=filter_form.filters(), only=only, limit=BULK_APPROVE_LIMIT
    )
    initial = snapshot(request, filter_form, "conflicts", batch, resolution=resolution)
    form = ConflictBulkForm(initial=initial)
    return _bulk_page(
        request, tenant, filter_form, batch=batch, form=form, selection=only is not None
    )


@tenant_view(RESOLVE_CONFLICTS)
@require_POST
def conflict_selection(request: ConsoleRequest, tenant: Tenant) -> HttpResponse:
    """The conflicts ticked in the queue, with its filters and the resolution chosen: the
    confirmation lists exactly them. Nothing is resolved here; the confirmation's POST does."""
    form = ConflictSelectionForm(request.POST, reviewer_id=reviewer_id(request))
    if not form.is_valid():
        fallback = "Tick the conflicts to resolve first."
        say_errors(request, form, "conflicts", "resolution", fallback=fallback)
        return redirect(_filtered_url(tenant, form))
    filter_form = conflict_filter_form(
        request, {name: request.POST.get(name, "") for name in ConflictQueueForm.FILTER_FIELDS}
    )
    return _bulk_confirmation(
        request,
        tenant,
        filter_form,
        resolution=form.cleaned_data["resolution"],
        only=form.cleaned_data["conflicts"],
    )


def _left_alone(listed: list[uuid.UUID], batch: list[Conflict]) -> list[str]:
    """The listed conflicts the confirmation no longer selects, each named with why: resolved
    meanwhile (by whom), or no longer matching the filters (or expired)."""
    missing = set(listed) - {item.pk for item in batch}
    named = []
    for conflict in Conflict.objects.filter(pk__in=missing).select_related("fact"):
        if conflict.state == ConflictState.RESOLVED:
            why = f"already resolved by {conflict.resolver_label or 'the system'}"
        else:
            why = "no longer matches the filters (or a version expired)"
        named.append(f"{item_label(conflict)}: {why}")
    gone = len(missing) - len(named)
    if gone:
        named.append(f"{gone} no longer exist{'s' if gone == 1 else ''}")
    return sorted(named)


@tenant_view(RESOLVE_CONFLICTS)
@require_http_methods(["GET", "POST"])
def conflict_bulk_resolve(request: ConsoleRequest, tenant: Tenant) -> HttpResponse:
    """GET: the open conflicts the filters match (up to the limit), listed, with a form
    carrying their ids. POST: resolve those of them still open and still matching, each on
    its own (and audited on its own); the refused and the left alone are named."""
    if request.method != "POST":
        filter_form = conflict_filter_form(request, request.GET)
        if filter_form.is_bound and not filter_form.is_valid():
            return redirect("console:conflicts", tenant_slug=tenant.slug)
        accept = request.GET.get("resolution") == Resolution.ACCEPT_NEW
        resolution = Resolution.ACCEPT_NEW if accept else Resolution.KEEP_CURRENT
        return _bulk_confirmation(request, tenant, filter_form, resolution=resolution)

    form = ConflictBulkForm(request.POST, reviewer_id=reviewer_id(request))
    filter_form = conflict_filter_form(request, request.POST)
    if not form.is_valid():
        if "conflicts" in form.errors or not filter_form.is_valid():
            say_errors(request, form, "conflicts", fallback="Start again from the queue.")
            return redirect("console:conflicts", tenant_slug=tenant.slug)
        # The same snapshot again, with the errors.
        shown = conflict_queue_selection(
            filters=filter_form.filters(), only=form.cleaned_data["conflicts"]
        )
        return _bulk_page(
            request, tenant, filter_form, batch=shown, form=form, selection=True, status=400
        )
    queue_url = _filtered_url(tenant, filter_form)
    if not form_nonce_consume(request, form.cleaned_data["nonce"]):
        messages.info(request, "That bulk resolution was already submitted; nothing was repeated.")
        return redirect(queue_url)
    ids: list[uuid.UUID] = form.cleaned_data["conflicts"]
    resolution = form.cleaned_data["resolution"]
    batch = conflict_queue_selection(filters=form.filters(), only=ids)
    outcome = conflicts_resolve_bulk(
        conflicts=batch,
        actor=Actor.for_user(request.user),
        resolution=resolution,
        reason=form.cleaned_data["reason"],
    )
    done = len(outcome.decided)
    messages.success(
        request,
        f"Resolved {done} conflict{'s' if done != 1 else ''}: {RESOLVED_AS[resolution]} of "
        f"{'each' if done != 1 else 'it'}; the other versions are superseded.",
    )
    refused = [f"{item_label(item)}: {why}" for item, why in outcome.refused]
    refused += _left_alone(ids, batch)
    if refused:
        messages.warning(
            request, f"{len(refused)} could not be resolved and stay as they are: {listed(refused)}"
        )
    return redirect(queue_url)
