"""Console: the review queues. Pending promotion requests (approve, reject, bulk approve) and
open conflicts (keep current, accept new, write a corrected value).

Thin views: a form parses, a selector of :mod:`apps.records.review` reads within the tenant,
the records services change and audit. Decisions answer htmx with the updated item (it
changes in place) plus the message; without JavaScript they redirect back to the queue.
Deciding twice is harmless: the service refuses the second decision and the item simply
shows the first one.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.audit.models import ActorType
from apps.audit.services import Actor
from apps.tenancy.models import Tenant
from apps.tenancy.permissions import RESOLVE_CONFLICTS, REVIEW_PROMOTIONS
from apps.tenancy.views import (
    ConsoleRequest,
    _render,
    form_nonce_consume,
    form_nonce_issue,
    tenant_view,
)

from ..forms_review import (
    ApproveForm,
    BulkApproveForm,
    ConflictQueueForm,
    ConflictResolveForm,
    PromotionQueueFilterForm,
    RejectForm,
)
from ..models import Conflict, PromotionRequest
from ..review import (
    BULK_APPROVE_LIMIT,
    CONFLICT_PAGE_SIZE,
    COUNT_LIMIT,
    QUEUE_PAGE_SIZE,
    conflict_get,
    conflict_queue_count,
    conflict_queue_page,
    promotion_queue_count,
    promotion_queue_page,
    promotion_queue_selection,
    promotion_request_get,
    promotions_approve_bulk,
)
from ..services import (
    OwnEvidence,
    RecordError,
    conflict_resolve,
    promotion_approve,
    promotion_reject,
)

QUEUE_TEMPLATE = "console/review/queue.html"
REQUEST_TEMPLATE = "console/review/request.html"
BULK_TEMPLATE = "console/review/bulk_approve.html"
CONFLICTS_TEMPLATE = "console/review/conflicts.html"
CONFLICT_TEMPLATE = "console/review/conflict.html"
# Refusals listed one by one after a bulk approval; the rest are counted.
REFUSALS_LISTED = 10
# Requests a bulk confirmation lists by name; the rest of the snapshot is counted.
BULK_LISTED = 20


def _safe_next(request: ConsoleRequest, fallback: str) -> str:
    """Where to go back to after a change: the queue as it was filtered, never off-site."""
    target = request.POST.get("next") or ""
    if target and url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return target
    return fallback


def _reviewer_context(request: ConsoleRequest, tenant: Tenant, section: str) -> dict[str, Any]:
    is_person = getattr(request.user, "pk", None) is not None
    return {
        "tenant": tenant,
        "section": section,
        # Lets an item say "you wrote this record" before the reviewer tries to approve it.
        "reviewer_type": ActorType.USER,
        "reviewer_id": str(request.user.pk) if is_person else "",
    }


# --- the promotion queue --------------------------------------------------------------------


def _queue_context(request: ConsoleRequest, tenant: Tenant) -> dict[str, Any]:
    form = PromotionQueueFilterForm(request.GET or None)
    base = reverse("console:review", kwargs={"tenant_slug": tenant.slug})
    page = None
    count = 0
    earlier_url = later_url = None
    if not form.is_bound or form.is_valid():
        filters = form.filters()
        cursors = form.cleaned_data if form.is_bound else {}
        page = promotion_queue_page(
            filters=filters,
            after=cursors.get("after"),
            before=cursors.get("before"),
            size=QUEUE_PAGE_SIZE,
        )
        count = promotion_queue_count(filters=filters)
        if page.earlier_than is not None:
            earlier_url = f"{base}?{form.query_for(before=page.earlier_than.token())}"
        if page.later_than is not None:
            later_url = f"{base}?{form.query_for(after=page.later_than.token())}"
    filtered = form.is_bound and any(request.GET.get(name) for name in form.FILTER_FIELDS)
    filter_query = form.query_for() if filtered else ""
    return {
        **_reviewer_context(request, tenant, "review"),
        "filter_form": form,
        "page": page,
        "count": count,
        "count_limit": COUNT_LIMIT,
        "bulk_limit": BULK_APPROVE_LIMIT,
        "filtered": filtered,
        "first_url": f"{base}?{filter_query}" if filtered else base,
        "bulk_url": reverse("console:review-bulk-approve", kwargs={"tenant_slug": tenant.slug})
        + (f"?{filter_query}" if filter_query else ""),
        "earlier_url": earlier_url,
        "later_url": later_url,
        "next_url": request.get_full_path(),
    }


@tenant_view(REVIEW_PROMOTIONS)
@require_GET
def review_queue(request: ConsoleRequest, tenant: Tenant) -> HttpResponse:
    """Pending promotion requests, oldest first, filtered and paged by keyset."""
    return _render(request, QUEUE_TEMPLATE, _queue_context(request, tenant), partial="results")


def _request_or_404(request_id: uuid.UUID) -> PromotionRequest:
    found = promotion_request_get(request_id)
    if found is None:
        raise Http404("No such promotion request")
    return found


def _item_context(
    request: ConsoleRequest, tenant: Tenant, item: PromotionRequest, **extra: Any
) -> dict[str, Any]:
    queue_url = reverse("console:review", kwargs={"tenant_slug": tenant.slug})
    return {
        **_reviewer_context(request, tenant, "review"),
        "item": item,
        "next_url": _safe_next(request, queue_url) if request.method == "POST" else queue_url,
        **extra,
    }


@tenant_view(REVIEW_PROMOTIONS)
@require_GET
def review_request(request: ConsoleRequest, tenant: Tenant, request_id: uuid.UUID) -> HttpResponse:
    """One promotion request on its own page (a permalink, and the no-JS error page)."""
    item = _request_or_404(request_id)
    return render(request, REQUEST_TEMPLATE, _item_context(request, tenant, item))


def _decision_answer(
    request: ConsoleRequest,
    tenant: Tenant,
    item: PromotionRequest,
    *,
    item_error: str = "",
    reject_form: RejectForm | None = None,
    approve_form: ApproveForm | None = None,
) -> HttpResponse:
    """The item as it stands now: in place for htmx, else back to the queue (or, when the
    decision needs correcting, the request's own page with the error)."""
    context = _item_context(
        request,
        tenant,
        item,
        item_error=item_error,
        reject_form=reject_form,
        approve_form=approve_form,
    )
    needs_correcting = bool(
        item_error or (reject_form and reject_form.errors) or (approve_form and approve_form.errors)
    )
    if request.htmx:
        return render(request, f"{QUEUE_TEMPLATE}#item_response", context)
    if needs_correcting:
        return render(request, REQUEST_TEMPLATE, context, status=400)
    queue_url = reverse("console:review", kwargs={"tenant_slug": tenant.slug})
    return redirect(_safe_next(request, queue_url))


def _decide(
    request: ConsoleRequest, tenant: Tenant, request_id: uuid.UUID, *, approve: bool
) -> HttpResponse:
    item = _request_or_404(request_id)
    form: ApproveForm | RejectForm = (
        ApproveForm(request.POST) if approve else RejectForm(request.POST)
    )
    if not form.is_valid():
        if isinstance(form, ApproveForm):
            return _decision_answer(request, tenant, item, approve_form=form)
        return _decision_answer(request, tenant, item, reject_form=form)
    subject = f"{item.record.subject} · {item.record.key}"
    try:
        if approve:
            promotion_approve(
                request=item, actor=Actor.for_user(request.user), reason=form.cleaned_data["reason"]
            )
            messages.success(request, f"Approved {subject}: the record is confirmed.")
        else:
            promotion_reject(
                request=item, actor=Actor.for_user(request.user), reason=form.cleaned_data["reason"]
            )
            messages.success(request, f"Rejected {subject}: the record stays provisional.")
    except OwnEvidence as error:
        return _decision_answer(request, tenant, item, item_error=str(error))
    except RecordError as error:
        if "state" not in error.extra:
            return _decision_answer(request, tenant, item, item_error=str(error))
        # A repeated click, or another reviewer got there first: show what was decided.
        messages.info(request, f"{subject}: {error}")
    return _decision_answer(request, tenant, _request_or_404(request_id))


@tenant_view(REVIEW_PROMOTIONS)
@require_POST
def review_approve(request: ConsoleRequest, tenant: Tenant, request_id: uuid.UUID) -> HttpResponse:
    """Approve: the record becomes confirmed. Refused when the reviewer wrote the record."""
    return _decide(request, tenant, request_id, approve=True)


@tenant_view(REVIEW_PROMOTIONS)
@require_POST
def review_reject(request: ConsoleRequest, tenant: Tenant, request_id: uuid.UUID) -> HttpResponse:
    """Reject, with a reason: the record stays provisional and expires on its short clock."""
    return _decide(request, tenant, request_id, approve=False)


# --- bulk approval --------------------------------------------------------------------------


def _bulk_context(
    request: ConsoleRequest,
    tenant: Tenant,
    filter_form: PromotionQueueFilterForm,
    *,
    batch: list[PromotionRequest],
    form: BulkApproveForm,
) -> dict[str, Any]:
    count = promotion_queue_count(filters=filter_form.filters(), limit=BULK_APPROVE_LIMIT)
    return {
        **_reviewer_context(request, tenant, "review"),
        "filter_form": filter_form,
        "filter_summary": filter_form.filter_summary(),
        "batch": batch,
        "batch_listed": batch[:BULK_LISTED],
        "batch_unlisted": max(len(batch) - BULK_LISTED, 0),
        "count": len(batch),
        "more_than_limit": count > BULK_APPROVE_LIMIT,
        "bulk_limit": BULK_APPROVE_LIMIT,
        "queue_url": _filtered_queue_url(tenant, filter_form),
        "form": form,
    }


def _bulk_confirmation(
    request: ConsoleRequest, tenant: Tenant, filter_form: PromotionQueueFilterForm
) -> HttpResponse:
    """The confirmation page: what the filters select now, as a snapshot of ids to approve."""
    batch = promotion_queue_selection(filters=filter_form.filters(), limit=BULK_APPROVE_LIMIT)
    initial = {name: filter_form.data.get(name, "") for name in filter_form.FILTER_FIELDS}
    form = BulkApproveForm(
        initial={
            **initial,
            "requests": [str(item.pk) for item in batch],
            "nonce": form_nonce_issue(request),
        }
    )
    return render(
        request, BULK_TEMPLATE, _bulk_context(request, tenant, filter_form, batch=batch, form=form)
    )


@tenant_view(REVIEW_PROMOTIONS)
@require_http_methods(["GET", "POST"])
def review_bulk_approve(request: ConsoleRequest, tenant: Tenant) -> HttpResponse:
    """GET: the pending requests the filters match (up to the limit), listed, and a form
    carrying their ids. POST: approve those of them that are still pending and still match;
    nothing outside the confirmation is ever approved, and what was left alone is reported."""
    if request.method != "POST":
        filter_form = PromotionQueueFilterForm(request.GET or None)
        if filter_form.is_bound and not filter_form.is_valid():
            return redirect("console:review", tenant_slug=tenant.slug)
        return _bulk_confirmation(request, tenant, filter_form)

    form = BulkApproveForm(request.POST)
    filter_form = PromotionQueueFilterForm(request.POST)
    if not form.is_valid():
        if "requests" in form.errors or not filter_form.is_valid():
            problems = [str(message) for message in form.errors.get("requests", [])]
            messages.error(request, " ".join(problems) or "Start again from the queue.")
            return redirect("console:review", tenant_slug=tenant.slug)
        # The same snapshot again, with the errors: the reviewer corrects and confirms what
        # they were shown, not a fresh selection.
        shown = promotion_queue_selection(
            filters=filter_form.filters(),
            only=form.cleaned_data["requests"],
            limit=BULK_APPROVE_LIMIT,
        )
        context = _bulk_context(request, tenant, filter_form, batch=shown, form=form)
        return render(request, BULK_TEMPLATE, context, status=400)
    queue_url = _filtered_queue_url(tenant, filter_form)
    if not form_nonce_consume(request, form.cleaned_data["nonce"]):
        messages.info(request, "That bulk approval was already submitted; nothing was repeated.")
        return redirect(queue_url)
    listed: list[uuid.UUID] = form.cleaned_data["requests"]
    batch = promotion_queue_selection(filters=form.filters(), only=listed, limit=BULK_APPROVE_LIMIT)
    outcome = promotions_approve_bulk(
        requests=batch, actor=Actor.for_user(request.user), reason=form.cleaned_data["reason"]
    )
    approved = len(outcome.approved)
    messages.success(
        request, f"Approved {approved} request{'s' if approved != 1 else ''}: confirmed."
    )
    left_alone = len(listed) - len(batch)
    if left_alone:
        messages.warning(
            request,
            f"{left_alone} of the {len(listed)} listed request{'s' if len(listed) != 1 else ''} "
            "changed since the confirmation (decided by someone else, expired, or no longer "
            "matching the filters) and were left as they are.",
        )
    if outcome.refused:
        refusals = "; ".join(
            f"{item.record.subject} · {item.record.key}: {why}"
            for item, why in outcome.refused[:REFUSALS_LISTED]
        )
        more = len(outcome.refused) - REFUSALS_LISTED
        messages.warning(
            request,
            f"{len(outcome.refused)} could not be approved and stay pending: {refusals}"
            + (f"; and {more} more." if more > 0 else "."),
        )
    return redirect(queue_url)


def _filtered_queue_url(tenant: Tenant, filter_form: PromotionQueueFilterForm) -> str:
    queue_url = reverse("console:review", kwargs={"tenant_slug": tenant.slug})
    query = filter_form.query_for()
    return f"{queue_url}?{query}" if query else queue_url


# --- the conflict queue ---------------------------------------------------------------------


def _conflicts_context(request: ConsoleRequest, tenant: Tenant) -> dict[str, Any]:
    form = ConflictQueueForm(request.GET or None)
    base = reverse("console:conflicts", kwargs={"tenant_slug": tenant.slug})
    page = None
    earlier_url = later_url = None
    if not form.is_bound or form.is_valid():
        cursors = form.cleaned_data if form.is_bound else {}
        page = conflict_queue_page(
            after=cursors.get("after"), before=cursors.get("before"), size=CONFLICT_PAGE_SIZE
        )
        if page.earlier_than is not None:
            earlier_url = f"{base}?{form.query_for(before=page.earlier_than.token())}"
        if page.later_than is not None:
            later_url = f"{base}?{form.query_for(after=page.later_than.token())}"
    return {
        **_reviewer_context(request, tenant, "conflicts"),
        "pager_form": form,
        "page": page,
        "count": conflict_queue_count() if page is not None else 0,
        "count_limit": COUNT_LIMIT,
        "first_url": base,
        "earlier_url": earlier_url,
        "later_url": later_url,
        "next_url": request.get_full_path(),
        "resolve_form": None,
    }


@tenant_view(RESOLVE_CONFLICTS)
@require_GET
def conflicts(request: ConsoleRequest, tenant: Tenant) -> HttpResponse:
    """Open conflicts, oldest first: both versions side by side, their provenance, history."""
    return _render(
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
    queue_url = reverse("console:conflicts", kwargs={"tenant_slug": tenant.slug})
    return {
        **_reviewer_context(request, tenant, "conflicts"),
        "conflict": conflict,
        "next_url": _safe_next(request, queue_url) if request.method == "POST" else queue_url,
        # The conflict's own page opens the history; an item replaced in the queue keeps the
        # queue's compact form.
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
        return render(request, f"{CONFLICTS_TEMPLATE}#item_response", context)
    if form is not None and form.errors:
        return render(request, CONFLICT_TEMPLATE, context, status=400)
    queue_url = reverse("console:conflicts", kwargs={"tenant_slug": tenant.slug})
    return redirect(_safe_next(request, queue_url))


@tenant_view(RESOLVE_CONFLICTS)
@require_POST
def conflict_resolve_view(
    request: ConsoleRequest, tenant: Tenant, conflict_id: uuid.UUID
) -> HttpResponse:
    """Keep the current value, accept the new one, or write a corrected value; the losing
    version is superseded, never deleted. A bad corrected value changes nothing."""
    conflict = _conflict_or_404(conflict_id)
    form = ConflictResolveForm(request.POST)
    if not form.is_valid():
        return _resolve_answer(request, tenant, conflict, form=form)
    label = f"{conflict.fact.subject} · {conflict.fact.key}"
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
        field = error.extra.get("field")
        form.add_error(field if field in form.fields else None, str(error))
        return _resolve_answer(request, tenant, conflict, form=form)
    outcome = {
        "keep_current": "kept the current value",
        "accept_new": "accepted the new value",
        "corrected": "wrote a corrected value",
    }[resolution]
    messages.success(request, f"Resolved {label}: {outcome}. The other version is superseded.")
    return _resolve_answer(request, tenant, _conflict_or_404(conflict_id))
