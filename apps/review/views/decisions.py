"""Console: the promotion queue (approve, reject, bulk approve), and what both queues share.

A form parses, :mod:`apps.review.queues` reads within the tenant, the services change and
audit. Decisions answer htmx with the item changed in place; without JavaScript they
redirect back to the queue. Deciding twice is harmless: the service refuses the second.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

from django.contrib import messages
from django.forms import Form
from django.http import Http404, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.core.actors import Actor, ActorType
from apps.records.models import PromotionRequest, PromotionState
from apps.records.services import RecordError
from apps.review.claims import PROMOTIONS, ClaimKind, claims_held_count, item_label
from apps.review.forms import (
    ApproveForm,
    BulkApproveForm,
    PromotionQueueFilterForm,
    QueueFilterForm,
    RejectForm,
    ReverseForm,
    SelectionForm,
)
from apps.review.models import ReviewReason
from apps.review.queues import (
    BULK_APPROVE_LIMIT,
    COUNT_LIMIT,
    QUEUE_PAGE_SIZE,
    ClaimFilter,
    QueueGroup,
    QueueOrder,
    QueuePage,
    RequestGroups,
    arrivals_mark,
    group_filter,
    promotion_queue_count,
    promotion_queue_groups,
    promotion_queue_page,
    promotion_queue_refill,
    promotion_queue_selection,
    promotion_queue_sorted_page,
    promotion_request_get,
    promotions_approve_bulk,
    promotions_reject_bulk,
)
from apps.review.reasons import review_reasons
from apps.review.services import (
    Claimed,
    OwnEvidence,
    promotion_approve,
    promotion_reject,
    promotion_reopen,
    promotion_return_to_provisional,
)
from apps.tenancy.models import Tenant
from apps.tenancy.permissions import REVIEW_PROMOTIONS
from apps.tenancy.templatetags.console_format import human_label
from apps.tenancy.views import (
    ConsoleRequest,
    form_nonce_consume,
    form_nonce_issue,
    page_shown,
    render_page,
    tenant_view,
)

QUEUE_TEMPLATE = "console/review/queue.html"
REQUEST_TEMPLATE = "console/review/request.html"
BULK_TEMPLATE = "console/review/bulk_approve.html"
# Refusals listed one by one after a bulk approval; the rest are counted.
REFUSALS_LISTED = 10
# What an undo from the queue's toast records as its reason.
UNDO_REASON = "Undone from the review queue right after deciding."


def _safe_next(request: ConsoleRequest, fallback: str) -> str:
    """Where to go back to after a change: the queue as it was filtered, never off-site."""
    target = request.POST.get("next") or ""
    if target and url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return target
    return fallback


def with_query(url: str, query: str = "", **extra: str) -> str:
    """``url`` with the query string ``query`` and the parameters ``extra`` set on it."""
    params = QueryDict(query, mutable=True)
    for name, value in extra.items():
        params[name] = value
    shown = params.urlencode()
    return f"{url}?{shown}" if shown else url


def say_errors(request: ConsoleRequest, form: Form, *names: str, fallback: str = "") -> None:
    """Say what is wrong with ``form``'s fields ``names`` (or all of them), else ``fallback``."""
    problems = [str(m) for name in names or tuple(form.errors) for m in form.errors.get(name, [])]
    messages.error(request, " ".join(problems) or fallback)


def snapshot(
    request: ConsoleRequest,
    filter_form: QueueFilterForm[Any],
    name: str,
    batch: list[Any],
    **chosen: str,
) -> dict[str, Any]:
    """A confirmation's initial data: the queue's filters (hidden), the ids it lists as
    ``name``, what was chosen, and a fresh nonce."""
    filters = {field: filter_form.data.get(field, "") for field in filter_form.FILTER_FIELDS}
    ids = [str(item.pk) for item in batch]
    return {**filters, name: ids, **chosen, "nonce": form_nonce_issue(request)}


def listed(named: list[str], limit: int = REFUSALS_LISTED) -> str:
    """The first ``limit`` of ``named``, then how many more."""
    more = len(named) - limit
    return "; ".join(named[:limit]) + (f"; and {more} more." if more > 0 else ".")


def queue_context(
    request: ConsoleRequest,
    tenant: Tenant,
    section: str,
    base: str,
    form: QueueFilterForm[Any],
    page: QueuePage[Any] | None,
) -> dict[str, Any]:
    """What both queue pages (at ``base``) show around their items: filters, pager links."""
    filtered = form.is_bound and any(request.GET.get(name) for name in form.FILTER_FIELDS)
    earlier = page.earlier_than if page is not None else None
    later = page.later_than if page is not None else None
    return {
        **_reviewer_context(request, tenant, section),
        "filter_form": form,
        "page": page,
        "count_limit": COUNT_LIMIT,
        "bulk_limit": BULK_APPROVE_LIMIT,
        "filtered": filtered,
        # Pager links keep the order too.
        "first_url": with_query(base, form.query_for()),
        "earlier_url": with_query(base, form.query_for(before=earlier.token()))
        if earlier
        else None,
        "later_url": with_query(base, form.query_for(after=later.token())) if later else None,
        "next_url": request.get_full_path(),
        # The selection form and the batch claim carry the queue's filters, so a confirmation
        # decides only ticked items that still match them.
        "filter_values": [
            (name, request.GET[name]) for name in form.FILTER_FIELDS if request.GET.get(name)
        ]
        if filtered
        else [],
    }


def reviewer_id(request: ConsoleRequest) -> str:
    """The person's id as actors (and claims) record it."""
    return str(request.user.pk) if getattr(request.user, "pk", None) is not None else ""


def _reviewer_context(request: ConsoleRequest, tenant: Tenant, section: str) -> dict[str, Any]:
    return {
        "tenant": tenant,
        "section": section,
        # Lets an item say "you wrote this record" before the reviewer tries to approve it.
        "reviewer_type": ActorType.USER,
        "reviewer_id": reviewer_id(request),
        # Claims are shown as held "by you" or by someone else, and end at a moment.
        "now": timezone.now(),
    }


def queue_filter_form(request: ConsoleRequest, data: Any) -> PromotionQueueFilterForm:
    return PromotionQueueFilterForm(data or None, reviewer_id=reviewer_id(request))


def _canned_reasons() -> dict[str, list[ReviewReason]]:
    """The tenant's canned reasons by decision, in key order (one query)."""
    reasons: dict[str, list[ReviewReason]] = {"approve": [], "reject": []}
    for reason in review_reasons():
        reasons[reason.decision].append(reason)
    return reasons


# --- the promotion queue --------------------------------------------------------------------


def _queue_context(request: ConsoleRequest, tenant: Tenant) -> dict[str, Any]:
    form = queue_filter_form(request, request.GET)
    base = _queue_url(tenant)
    page = None
    groups = None
    count = 0
    paged_on = False
    if not form.is_bound or form.is_valid():
        filters = form.filters()
        cursors = form.cleaned_data if form.is_bound else {}
        if form.grouping:
            groups = promotion_queue_groups(filters=filters, by=form.grouping)
            page = QueuePage[PromotionRequest](items=[], earlier_than=None, later_than=None)
        elif form.order != QueueOrder.OLDEST:
            page = promotion_queue_sorted_page(
                filters=filters, order=form.order, after=cursors.get("after"), size=QUEUE_PAGE_SIZE
            )
            paged_on = cursors.get("after") is not None
        else:
            page = promotion_queue_page(
                filters=filters,
                after=cursors.get("after"),
                before=cursors.get("before"),
                size=QUEUE_PAGE_SIZE,
            )
        count = promotion_queue_count(filters=filters)
    context = queue_context(request, tenant, "review", base, form, page)
    # Bulk links do not keep the order: a bulk decision takes the oldest matching requests.
    filter_query = form.query_for() if context["filtered"] else ""
    bulk_url = reverse("console:review-bulk-approve", kwargs={"tenant_slug": tenant.slug})
    # "N new requests": what arrives after this moment, under these filters.
    arrivals = reverse("console:review-arrivals", kwargs={"tenant_slug": tenant.slug})
    not_listed = {} if page and page.items else {"listed": "no"}
    return {
        **context,
        "groups": _group_rows(tenant, form, groups) if groups is not None else None,
        "count": count,
        # A sorted queue pages only forward: its way back is the first page.
        "paged_on": paged_on,
        "bulk_url": with_query(bulk_url, filter_query),
        "bulk_reject_url": f"{bulk_url}?decision=reject"
        + (f"&{filter_query}" if filter_query else ""),
        "undo_reason": UNDO_REASON,
        "canned": _canned_reasons(),
        "arrivals_url": with_query(
            arrivals, filter_query, since=arrivals_mark().token(), **not_listed
        ),
        "claims_held": claims_held_count(holder_id=reviewer_id(request)),
        # The batch "Claim the next ..." offers: a page's worth.
        "claim_batch_size": QUEUE_PAGE_SIZE,
        "mine_url": with_query(base, form.query_for(), claim=ClaimFilter.MINE),
    }


def _queue_url(tenant: Tenant) -> str:
    return reverse("console:review", kwargs={"tenant_slug": tenant.slug})


def group_rows(
    form: QueueFilterForm[Any],
    groups: RequestGroups,
    *,
    queue_url: str,
    bulk_url: str,
    selector: str,
    by_label: str,
    decisions: dict[str, str],
    label_of: Callable[[str], str] = lambda value: "",
) -> dict[str, Any]:
    """Each group with the links that show it (the queue filtered by ``selector``) and that
    decide it together: ``decisions`` names each link and the query it adds to the bulk
    confirmation's, which lists exactly the group's items."""
    rows = []
    for group in groups.groups:
        query = QueryDict(form.query_for(), mutable=True)
        query.pop("group", None)
        query[selector] = group.value
        if selector == "key_exact":
            query.pop("key", None)
        shown = query.urlencode()
        rows.append(
            {
                "group": group,
                "label": label_of(group.value),
                "show_url": f"{queue_url}?{shown}",
                **{name: f"{bulk_url}?{extra}{shown}" for name, extra in decisions.items()},
            }
        )
    return {"by": groups.by, "by_label": by_label, "rows": rows, "more": groups.more}


def _group_rows(
    tenant: Tenant, form: PromotionQueueFilterForm, groups: RequestGroups
) -> dict[str, Any]:
    return group_rows(
        form,
        groups,
        queue_url=reverse("console:review", kwargs={"tenant_slug": tenant.slug}),
        bulk_url=reverse("console:review-bulk-approve", kwargs={"tenant_slug": tenant.slug}),
        selector=group_filter(groups.by),
        by_label=QueueGroup(groups.by).label.lower(),
        decisions={"approve_url": "", "reject_url": "decision=reject&"},
        label_of=lambda value: human_label(value) if groups.by == QueueGroup.SOURCE else "",
    )


@tenant_view(REVIEW_PROMOTIONS)
@require_GET
def review_queue(request: ConsoleRequest, tenant: Tenant) -> HttpResponse:
    """Pending promotion requests, oldest first, filtered and paged by keyset."""
    return render_page(request, QUEUE_TEMPLATE, _queue_context(request, tenant), partial="results")


def _request_or_404(request_id: uuid.UUID) -> PromotionRequest:
    found = promotion_request_get(request_id)
    if found is None:
        raise Http404("No such promotion request")
    return found


def _item_context(
    request: ConsoleRequest, tenant: Tenant, item: PromotionRequest, **extra: Any
) -> dict[str, Any]:
    queue_url = _queue_url(tenant)
    in_list = _in_list(request)
    if request.method == "POST":
        next_url = _safe_next(request, queue_url)
    elif in_list:
        # The pane's card goes back to (and counts under the filters of) the queue page it
        # sits in.
        next_url = page_shown(request)
    else:
        next_url = queue_url
    return {
        **_reviewer_context(request, tenant, "review"),
        "item": item,
        "next_url": next_url,
        "list_mode": in_list,
        "undo_reason": UNDO_REASON,
        "canned": _canned_reasons(),
        **extra,
    }


def _in_list(request: ConsoleRequest) -> bool:
    """The request comes from the queue's triage list (its rows or its detail pane), whose
    answers also update the list: the decided row leaves, the count changes."""
    if not request.htmx:
        return False
    source = request.POST if request.method == "POST" else request.GET
    return source.get("view") == "list"


def shown_query(request: ConsoleRequest, queue_url: str) -> QueryDict | None:
    """The query of the queue page the action came from (its ``next``): its filters."""
    shown = urlsplit(_safe_next(request, queue_url))
    return QueryDict(shown.query) if shown.query else None


def queue_counts(
    request: ConsoleRequest, filters: Any, count: Callable[..., int], kind: ClaimKind = PROMOTIONS
) -> dict[str, Any]:
    """A queue's count under ``filters`` and the reviewer's claims, to redraw after an action."""
    return {
        "count": count(filters=filters),
        "count_limit": COUNT_LIMIT,
        "filtered": filters.active,
        "claims_held": claims_held_count(holder_id=reviewer_id(request), kind=kind),
    }


def _posted_ids(request: ConsoleRequest, name: str, limit: int) -> list[uuid.UUID]:
    ids = []
    for value in request.POST.getlist(name)[:limit]:
        try:
            ids.append(uuid.UUID(value))
        except ValueError:
            continue
    return ids


def _refill(request: ConsoleRequest, form: PromotionQueueFilterForm) -> list[PromotionRequest]:
    """The request to add at the end of the list after a decision: the next one after the
    list's last row (``last``) that the list does not show yet (``shown``)."""
    last = _posted_ids(request, "last", 1)
    if not last or form.grouping:
        return []
    shown = tuple(_posted_ids(request, "shown", QUEUE_PAGE_SIZE * 3))
    filters = replace(form.filters(), shown=shown)
    return promotion_queue_refill(filters=filters, order=form.order, after_id=last[0])


def _then_item(request: ConsoleRequest) -> PromotionRequest | None:
    """The open request the list advances to after a decision (``then``: the next row), so
    the decision's one answer already shows it in the detail pane."""
    try:
        then = uuid.UUID(request.POST.get("then", ""))
    except ValueError:
        return None
    found = promotion_request_get(then)
    return found if found is not None and found.state == PromotionState.OPEN else None


@tenant_view(REVIEW_PROMOTIONS)
@require_GET
def review_request(request: ConsoleRequest, tenant: Tenant, request_id: uuid.UUID) -> HttpResponse:
    """One promotion request on its own page (a permalink, and the no-JS error page)."""
    item = _request_or_404(request_id)
    context = _item_context(request, tenant, item)
    if context["list_mode"]:
        return render(request, f"{QUEUE_TEMPLATE}#detail", context)
    return render(request, REQUEST_TEMPLATE, context)


def _answer(
    request: ConsoleRequest,
    tenant: Tenant,
    item: PromotionRequest,
    *,
    item_error: str = "",
    refresh_row: bool = False,
    reversing: bool = False,
    **forms: Form | None,
) -> HttpResponse:
    """The item as it stands now: in place for htmx, else back to the queue (or, when the
    action needs correcting, the request's own page with the error). In the triage list a
    decision's answer advances the list, a reversal's puts the request back in it.
    ``refresh_row``: the list's row changed too (someone else claimed the request meanwhile)."""
    context = _item_context(
        request, tenant, item, item_error=item_error, refresh_row=refresh_row, **forms
    )
    failed = bool(item_error) or any(form.errors for form in forms.values() if form is not None)
    if context["list_mode"]:
        if failed or (item.state == PromotionState.OPEN) != reversing:
            return render(request, f"{QUEUE_TEMPLATE}#detail_response", context)
        shown = queue_filter_form(request, shown_query(request, _queue_url(tenant)))
        context.update(queue_counts(request, shown.filters(), promotion_queue_count))
        if reversing:
            return render(request, f"{QUEUE_TEMPLATE}#reopened_response", context)
        context.update(then_item=_then_item(request), refill=_refill(request, shown))
        return render(request, f"{QUEUE_TEMPLATE}#decided_response", context)
    if request.htmx:
        return render(request, f"{QUEUE_TEMPLATE}#item_response", context)
    if failed:
        return render(request, REQUEST_TEMPLATE, context, status=400)
    return redirect(_safe_next(request, _queue_url(tenant)))


def _decide(
    request: ConsoleRequest, tenant: Tenant, request_id: uuid.UUID, *, approve: bool
) -> HttpResponse:
    item = _request_or_404(request_id)
    form = (ApproveForm if approve else RejectForm)(request.POST)
    if not form.is_valid():
        if approve:
            return _answer(request, tenant, item, approve_form=form)
        return _answer(request, tenant, item, reject_form=form)
    subject = item_label(item)
    decide = promotion_approve if approve else promotion_reject
    try:
        decide(request=item, actor=Actor.for_user(request.user), reason=form.cleaned_data["reason"])
    except OwnEvidence as error:
        return _answer(request, tenant, item, item_error=str(error))
    except Claimed as error:
        # A stale tab: someone claimed it after this page was drawn. Show who holds it.
        item = _request_or_404(request_id)
        return _answer(request, tenant, item, item_error=str(error), refresh_row=True)
    except RecordError as error:
        if "state" not in error.extra:
            return _answer(request, tenant, item, item_error=str(error))
        # A repeated click, or another reviewer got there first: show what was decided.
        messages.info(request, f"{subject}: {error}")
    else:
        # In the triage list the undo notice reports the decision; a message would repeat it.
        if not _in_list(request):
            done = "the record is confirmed" if approve else "the record stays provisional"
            messages.success(request, f"{'Approved' if approve else 'Rejected'} {subject}: {done}.")
    return _answer(request, tenant, _request_or_404(request_id))


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


@tenant_view(REVIEW_PROMOTIONS)
@require_POST
def review_reverse(request: ConsoleRequest, tenant: Tenant, request_id: uuid.UUID) -> HttpResponse:
    """Reverse a decision, with a reason: an approval returns the record to provisional, a
    rejection reopens the request. The queue's undo toast posts here too, so an undo is an
    audited reversal like any other (decisions are never held back waiting for a toast)."""
    item = _request_or_404(request_id)
    form = ReverseForm(request.POST)
    if not form.is_valid():
        return _answer(request, tenant, item, reversing=True, reverse_form=form)
    subject = item_label(item)
    actor = Actor.for_user(request.user)
    reason = form.cleaned_data["reason"]
    try:
        if item.state == PromotionState.APPROVED:
            promotion_return_to_provisional(request=item, actor=actor, reason=reason)
            messages.success(request, f"Returned {subject} to provisional: it awaits a decision.")
        elif item.state == PromotionState.REJECTED:
            promotion_reopen(request=item, actor=actor, reason=reason)
            messages.success(request, f"Reopened the request for {subject}.")
        else:
            messages.info(request, f"{subject} is already open: nothing to reverse.")
    except RecordError as error:
        if "state" not in error.extra:
            return _answer(request, tenant, item, item_error=str(error), reversing=True)
        messages.info(request, f"{subject}: {error}")
    return _answer(request, tenant, _request_or_404(request_id), reversing=True)


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
        "count": len(batch),
        "more_than_limit": count > BULK_APPROVE_LIMIT,
        "bulk_limit": BULK_APPROVE_LIMIT,
        "queue_url": _filtered_queue_url(tenant, filter_form),
        "form": form,
        "rejects": form.rejects,
        "canned": _canned_reasons(),
    }


def _bulk_confirmation(
    request: ConsoleRequest,
    tenant: Tenant,
    filter_form: PromotionQueueFilterForm,
    *,
    decision: str,
    only: list[uuid.UUID] | None = None,
) -> HttpResponse:
    """The confirmation page: what the filters select now (or, for a selection, which of the
    ticked requests they still select), as a snapshot of ids to approve or reject."""
    batch = promotion_queue_selection(
        filters=filter_form.filters(), only=only, limit=BULK_APPROVE_LIMIT
    )
    form = BulkApproveForm(
        initial=snapshot(request, filter_form, "requests", batch, decision=decision)
    )
    context = _bulk_context(request, tenant, filter_form, batch=batch, form=form)
    return render(request, BULK_TEMPLATE, {**context, "selection": only is not None})


@tenant_view(REVIEW_PROMOTIONS)
@require_http_methods(["GET", "POST"])
def review_bulk_approve(request: ConsoleRequest, tenant: Tenant) -> HttpResponse:
    """GET: the pending requests the filters match (up to the limit), listed, and a form
    carrying their ids. POST: approve those of them that are still pending and still match;
    nothing outside the confirmation is ever approved, and what was left alone is reported."""
    if request.method != "POST":
        filter_form = queue_filter_form(request, request.GET)
        if filter_form.is_bound and not filter_form.is_valid():
            return redirect("console:review", tenant_slug=tenant.slug)
        decision = "reject" if request.GET.get("decision") == "reject" else "approve"
        return _bulk_confirmation(request, tenant, filter_form, decision=decision)

    form = BulkApproveForm(request.POST, reviewer_id=reviewer_id(request))
    filter_form = queue_filter_form(request, request.POST)
    if not form.is_valid():
        if "requests" in form.errors or not filter_form.is_valid():
            say_errors(request, form, "requests", fallback="Start again from the queue.")
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
    ids: list[uuid.UUID] = form.cleaned_data["requests"]
    batch = promotion_queue_selection(filters=form.filters(), only=ids, limit=BULK_APPROVE_LIMIT)
    decide = promotions_reject_bulk if form.rejects else promotions_approve_bulk
    outcome = decide(
        requests=batch, actor=Actor.for_user(request.user), reason=form.cleaned_data["reason"]
    )
    decided = len(outcome.decided)
    plural = "s" if decided != 1 else ""
    if form.rejects:
        messages.success(request, f"Rejected {decided} request{plural}: they stay provisional.")
    else:
        messages.success(request, f"Approved {decided} request{plural}: confirmed.")
    left_alone = len(ids) - len(batch)
    if left_alone:
        messages.warning(
            request,
            f"{left_alone} of the {len(ids)} listed request{'s' if len(ids) != 1 else ''} "
            "changed since the confirmation (decided by someone else, expired, or no longer "
            "matching the filters) and were left as they are.",
        )
    if outcome.refused:
        refusals = [f"{item_label(item)}: {why}" for item, why in outcome.refused]
        messages.warning(
            request,
            f"{len(outcome.refused)} could not be {'rejected' if form.rejects else 'approved'} "
            f"and stay pending: {listed(refusals)}",
        )
    return redirect(queue_url)


@tenant_view(REVIEW_PROMOTIONS)
@require_POST
def review_selection(request: ConsoleRequest, tenant: Tenant) -> HttpResponse:
    """The requests ticked in the queue, posted with the queue's filters: the same
    confirmation as a bulk approval (a snapshot of exactly these ids, listed), for approving
    or rejecting them. Nothing is decided here; the confirmation's POST decides."""
    form = SelectionForm(request.POST, reviewer_id=reviewer_id(request))
    if not form.is_valid():
        say_errors(request, form, "requests", fallback="Tick the requests to decide first.")
        return redirect(_filtered_queue_url(tenant, form))
    filter_form = queue_filter_form(
        request,
        {name: request.POST.get(name, "") for name in PromotionQueueFilterForm.FILTER_FIELDS},
    )
    return _bulk_confirmation(
        request,
        tenant,
        filter_form,
        decision=form.cleaned_data["decision"],
        only=form.cleaned_data["requests"],
    )


def _filtered_queue_url(tenant: Tenant, filter_form: PromotionQueueFilterForm) -> str:
    return with_query(_queue_url(tenant), filter_form.query_for() if filter_form.is_valid() else "")
