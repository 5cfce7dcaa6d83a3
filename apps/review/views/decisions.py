"""Console: the promotion queue. Pending promotion requests (approve, reject, bulk approve);
the conflict queue is :mod:`apps.review.views.conflicts`.

Thin views: a form parses, a selector of :mod:`apps.review.queues` reads within the tenant,
the records services change and audit. Decisions answer htmx with the updated item (it
changes in place) plus the message; without JavaScript they redirect back to the queue.
Deciding twice is harmless: the service refuses the second decision and the item simply
shows the first one.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

from django.contrib import messages
from django.http import Http404, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.core.actors import Actor, ActorType
from apps.core.pagination import Cursor
from apps.records.models import PromotionRequest, PromotionState
from apps.records.services import RecordError
from apps.review.claims import claims_held_count
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
    GROUP_FILTERS,
    QUEUE_PAGE_SIZE,
    ClaimFilter,
    QueueGroup,
    QueueOrder,
    QueuePage,
    RequestGroups,
    arrivals_mark,
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
CONFLICTS_TEMPLATE = "console/review/conflicts.html"
CONFLICT_TEMPLATE = "console/review/conflict.html"
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
    base = reverse("console:review", kwargs={"tenant_slug": tenant.slug})
    page = None
    groups = None
    count = 0
    earlier_url = later_url = None
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
        if page.earlier_than is not None:
            earlier_url = f"{base}?{form.query_for(before=page.earlier_than.token())}"
        if page.later_than is not None:
            later_url = f"{base}?{form.query_for(after=page.later_than.token())}"
    filtered = form.is_bound and any(request.GET.get(name) for name in form.FILTER_FIELDS)
    filter_query = form.query_for() if filtered else ""
    # Pager links keep the order too; bulk links do not need it (a bulk decision takes the
    # oldest matching requests).
    pager_query = form.query_for() if form.is_bound else ""
    filter_values = (
        [(name, request.GET[name]) for name in form.FILTER_FIELDS if request.GET.get(name)]
        if filtered
        else []
    )
    return {
        **_reviewer_context(request, tenant, "review"),
        "filter_form": form,
        "page": page,
        "groups": _group_rows(tenant, form, groups) if groups is not None else None,
        "count": count,
        "count_limit": COUNT_LIMIT,
        "bulk_limit": BULK_APPROVE_LIMIT,
        "filtered": filtered,
        "first_url": f"{base}?{pager_query}" if pager_query else base,
        # A sorted queue pages only forward: its way back is the first page.
        "paged_on": paged_on,
        "bulk_url": reverse("console:review-bulk-approve", kwargs={"tenant_slug": tenant.slug})
        + (f"?{filter_query}" if filter_query else ""),
        "bulk_reject_url": reverse(
            "console:review-bulk-approve", kwargs={"tenant_slug": tenant.slug}
        )
        + "?decision=reject"
        + (f"&{filter_query}" if filter_query else ""),
        # The selection form carries the queue's filters, so its confirmation approves only
        # ticked requests that still match them.
        "filter_values": filter_values,
        "earlier_url": earlier_url,
        "later_url": later_url,
        "next_url": request.get_full_path(),
        "undo_reason": UNDO_REASON,
        "canned": _canned_reasons(),
        # "N new requests": what arrives after this moment, under these filters.
        "arrivals_url": _arrivals_url(
            tenant, filter_query, arrivals_mark(), listed=bool(page and page.items)
        ),
        "claims_held": claims_held_count(holder_id=reviewer_id(request)),
        "claim_batch_size": CLAIM_BATCH_DEFAULT,
        "mine_url": _mine_url(base, form),
    }


def _mine_url(base: str, form: PromotionQueueFilterForm) -> str:
    query = QueryDict(form.query_for() if form.is_bound else "", mutable=True)
    query["claim"] = ClaimFilter.MINE
    return f"{base}?{query.urlencode()}"


# The batch "Claim the next ..." offers: a page's worth.
CLAIM_BATCH_DEFAULT = QUEUE_PAGE_SIZE


def _arrivals_url(tenant: Tenant, filter_query: str, since: Cursor, *, listed: bool) -> str:
    query = QueryDict(filter_query, mutable=True)
    query["since"] = since.token()
    if not listed:
        query["listed"] = "no"
    url = reverse("console:review-arrivals", kwargs={"tenant_slug": tenant.slug})
    return f"{url}?{query.urlencode()}"


def group_rows(
    form: QueueFilterForm,
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
        selector=GROUP_FILTERS[groups.by],
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
    queue_url = reverse("console:review", kwargs={"tenant_slug": tenant.slug})
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


def _shown_form(request: ConsoleRequest, tenant: Tenant) -> PromotionQueueFilterForm:
    """The filter form of the queue page the action came from (its ``next``)."""
    queue_url = reverse("console:review", kwargs={"tenant_slug": tenant.slug})
    shown = urlsplit(_safe_next(request, queue_url))
    return queue_filter_form(request, QueryDict(shown.query) if shown.query else None)


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


def _list_counts(request: ConsoleRequest, tenant: Tenant) -> dict[str, Any]:
    """The queue's count, under the filters of the queue page the action came from."""
    form = _shown_form(request, tenant)
    filters = form.filters()
    return {
        "count": promotion_queue_count(filters=filters),
        "count_limit": COUNT_LIMIT,
        "filtered": filters.active,
        "claims_held": claims_held_count(holder_id=reviewer_id(request)),
    }


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


def _decision_answer(
    request: ConsoleRequest,
    tenant: Tenant,
    item: PromotionRequest,
    *,
    item_error: str = "",
    reject_form: RejectForm | None = None,
    approve_form: ApproveForm | None = None,
    refresh_row: bool = False,
) -> HttpResponse:
    """The item as it stands now: in place for htmx, else back to the queue (or, when the
    decision needs correcting, the request's own page with the error). ``refresh_row``: the
    list's row changed too (someone else claimed the request meanwhile)."""
    context = _item_context(
        request,
        tenant,
        item,
        item_error=item_error,
        reject_form=reject_form,
        approve_form=approve_form,
        refresh_row=refresh_row,
    )
    needs_correcting = bool(
        item_error or (reject_form and reject_form.errors) or (approve_form and approve_form.errors)
    )
    if context["list_mode"]:
        if needs_correcting or item.state == PromotionState.OPEN:
            return render(request, f"{QUEUE_TEMPLATE}#detail_response", context)
        context.update(
            _list_counts(request, tenant),
            then_item=_then_item(request),
            refill=_refill(request, _shown_form(request, tenant)),
        )
        return render(request, f"{QUEUE_TEMPLATE}#decided_response", context)
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
    # In the triage list the undo notice reports the decision; a message too would say it twice.
    announce = not _in_list(request)
    try:
        if approve:
            promotion_approve(
                request=item, actor=Actor.for_user(request.user), reason=form.cleaned_data["reason"]
            )
            if announce:
                messages.success(request, f"Approved {subject}: the record is confirmed.")
        else:
            promotion_reject(
                request=item, actor=Actor.for_user(request.user), reason=form.cleaned_data["reason"]
            )
            if announce:
                messages.success(request, f"Rejected {subject}: the record stays provisional.")
    except OwnEvidence as error:
        return _decision_answer(request, tenant, item, item_error=str(error))
    except Claimed as error:
        # A stale tab: someone claimed it after this page was drawn. Show who holds it.
        return _decision_answer(
            request, tenant, _request_or_404(request_id), item_error=str(error), refresh_row=True
        )
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


@tenant_view(REVIEW_PROMOTIONS)
@require_POST
def review_reverse(request: ConsoleRequest, tenant: Tenant, request_id: uuid.UUID) -> HttpResponse:
    """Reverse a decision, with a reason: an approval returns the record to provisional, a
    rejection reopens the request. The queue's undo toast posts here too, so an undo is an
    audited reversal like any other (decisions are never held back waiting for a toast)."""
    item = _request_or_404(request_id)
    form = ReverseForm(request.POST)
    if not form.is_valid():
        return _reverse_answer(request, tenant, item, reverse_form=form)
    subject = f"{item.record.subject} · {item.record.key}"
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
            return _reverse_answer(request, tenant, item, item_error=str(error))
        messages.info(request, f"{subject}: {error}")
    return _reverse_answer(request, tenant, _request_or_404(request_id))


def _reverse_answer(
    request: ConsoleRequest,
    tenant: Tenant,
    item: PromotionRequest,
    *,
    item_error: str = "",
    reverse_form: ReverseForm | None = None,
) -> HttpResponse:
    context = _item_context(request, tenant, item, item_error=item_error, reverse_form=reverse_form)
    failed = bool(item_error or (reverse_form and reverse_form.errors))
    if context["list_mode"]:
        if failed or item.state != PromotionState.OPEN:
            return render(request, f"{QUEUE_TEMPLATE}#detail_response", context)
        context.update(_list_counts(request, tenant))
        return render(request, f"{QUEUE_TEMPLATE}#reopened_response", context)
    if request.htmx:
        return render(request, f"{QUEUE_TEMPLATE}#item_response", context)
    if failed:
        return render(request, REQUEST_TEMPLATE, context, status=400)
    queue_url = reverse("console:review", kwargs={"tenant_slug": tenant.slug})
    return redirect(_safe_next(request, queue_url))


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
    initial = {name: filter_form.data.get(name, "") for name in filter_form.FILTER_FIELDS}
    form = BulkApproveForm(
        initial={
            **initial,
            "requests": [str(item.pk) for item in batch],
            "decision": decision,
            "nonce": form_nonce_issue(request),
        }
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
            f"{len(outcome.refused)} could not be {'rejected' if form.rejects else 'approved'} "
            f"and stay pending: {refusals}" + (f"; and {more} more." if more > 0 else "."),
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
        problems = [str(message) for message in form.errors.get("requests", [])]
        messages.error(request, " ".join(problems) or "Tick the requests to decide first.")
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
    queue_url = reverse("console:review", kwargs={"tenant_slug": tenant.slug})
    query = filter_form.query_for() if filter_form.is_valid() else ""
    return f"{queue_url}?{query}" if query else queue_url
