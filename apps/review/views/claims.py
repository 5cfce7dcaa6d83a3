"""Console: sharing out a queue while it is worked (claims, through
:mod:`apps.review.claims`) and the promotion queue's "N new requests" notice, polled. With
htmx a claim answers with the changed rows (and the detail pane showing one) out of band, so
the list keeps its place and focus; without JavaScript every form redirects to the queue.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from apps.core.actors import Actor
from apps.core.pagination import Cursor
from apps.records.models import PromotionRequest, PromotionState
from apps.review.claims import (
    CONFLICTS,
    PROMOTIONS,
    ClaimError,
    ClaimKind,
    ClaimOutcome,
    claims_held_count,
    claims_release,
    claims_take,
    item_label,
)
from apps.review.forms import ClaimBatchForm, ClaimForm, ConflictClaimBatchForm
from apps.review.queues import (
    COUNT_LIMIT,
    QUEUE_PAGE_SIZE,
    ClaimFilter,
    arrivals_mark,
    promotion_queue_arrivals,
    promotion_queue_count,
    promotion_queue_page,
    promotion_queue_selection,
    promotion_request_get,
)
from apps.review.views.decisions import (
    QUEUE_TEMPLATE,
    UNDO_REASON,
    _canned_reasons,
    _queue_url,
    _reviewer_context,
    _safe_next,
    listed,
    queue_filter_form,
    reviewer_id,
    say_errors,
    with_query,
)
from apps.tenancy.models import Tenant
from apps.tenancy.permissions import REVIEW_PROMOTIONS
from apps.tenancy.views import ConsoleRequest, page_shown, tenant_view

# Requests named one by one when a claim leaves some to their holders.
HELD_LISTED = 5


def _held_message(outcome: ClaimOutcome) -> str:
    named = [
        f"{item_label(item)} by {claim.holder_label} until {claim.expires_at:%H:%M} UTC"
        for item, claim in outcome.held
    ]
    return (
        f"{len(outcome.held)} {'is' if len(outcome.held) == 1 else 'are'} already claimed by "
        f"someone else and stay theirs: {listed(named, HELD_LISTED)}"
    )


def claims_report(request: ConsoleRequest, outcome: ClaimOutcome, *, claiming: bool) -> None:
    """Say what a claim (or a release) did: what it took, what stays another's, what was
    decided meanwhile."""
    done = len(outcome.done)
    noun = outcome.kind.noun + ("s" if done != 1 else "")
    if claiming and done:
        assert outcome.until is not None
        messages.success(
            request,
            f"Claimed {done} {noun} until {outcome.until:%H:%M} UTC: other reviewers "
            "see them as yours and cannot decide them meanwhile.",
        )
    elif done:
        messages.success(request, f"Released {done} {noun}: anyone may take them now.")
    elif not outcome.held and not outcome.closed:
        messages.info(request, "Nothing to release: you hold none of these.")
    if outcome.held:
        messages.warning(request, _held_message(outcome))
    if outcome.closed:
        messages.info(
            request,
            f"{outcome.closed} {'was' if outcome.closed == 1 else 'were'} decided meanwhile "
            "(or no longer exist) and were left as they are.",
        )


def claims_change(
    request: ConsoleRequest,
    tenant: Tenant,
    ids: list[uuid.UUID],
    *,
    claiming: bool,
    kind: ClaimKind = PROMOTIONS,
) -> None:
    """Claim (or release) the items ``ids`` for the person, and say what it did."""
    actor = Actor.for_user(request.user)
    try:
        if claiming:
            outcome = claims_take(tenant=tenant, request_ids=ids, actor=actor, kind=kind)
        else:
            outcome = claims_release(tenant=tenant, actor=actor, request_ids=ids, kind=kind)
    except ClaimError as error:
        messages.error(request, str(error))
        outcome = ClaimOutcome(kind=kind)
    claims_report(request, outcome, claiming=claiming)


def claim_batch(
    request: ConsoleRequest,
    tenant: Tenant,
    form: ClaimBatchForm | ConflictClaimBatchForm,
    queue_url: str,
    select: Callable[..., list[Any]],
) -> HttpResponse:
    """Claim the next items (oldest first) the queue's filters match that no one else holds,
    then show the queue narrowed to the reviewer's own claims."""
    kind = CONFLICTS if isinstance(form, ConflictClaimBatchForm) else PROMOTIONS
    if not form.is_valid():
        say_errors(request, form, fallback="Check the filters and try again.")
        return redirect(_safe_next(request, queue_url))
    available = replace(form.filters(), claim=ClaimFilter.AVAILABLE)
    batch = select(filters=available, limit=form.cleaned_data["size"])
    if not batch:
        settled = "resolved" if kind is CONFLICTS else "decided"
        messages.info(
            request, f"Nothing to claim: every matching {kind.noun} is {settled} or held."
        )
        return redirect(_safe_next(request, queue_url))
    actor = Actor.for_user(request.user)
    outcome = claims_take(tenant=tenant, request_ids=[i.pk for i in batch], actor=actor, kind=kind)
    claims_report(request, outcome, claiming=True)
    return redirect(with_query(queue_url, form.query_for(), claim=ClaimFilter.MINE))


def release_all(
    request: ConsoleRequest, tenant: Tenant, queue_url: str, kind: ClaimKind = PROMOTIONS
) -> HttpResponse:
    """Let go of every item of ``kind`` the reviewer holds."""
    outcome = claims_release(tenant=tenant, actor=Actor.for_user(request.user), kind=kind)
    claims_report(request, outcome, claiming=False)
    return redirect(_safe_next(request, queue_url))


def _claimed_rows(request: ConsoleRequest, tenant: Tenant, ids: list[uuid.UUID]) -> HttpResponse:
    """The changed rows, the focused card (``focused``) and the messages, out of band."""
    items = [found for pk in ids if (found := promotion_request_get(pk)) is not None]
    items = [item for item in items if item.state == PromotionState.OPEN]
    focused = request.POST.get("focused", "")
    card = next((item for item in items if str(item.pk) == focused), None)
    context = {
        **_reviewer_context(request, tenant, "review"),
        "rows": items,
        "card": card,
        "next_url": _safe_next(request, _queue_url(tenant)),
        "list_mode": True,
        "undo_reason": UNDO_REASON,
        "canned": _canned_reasons() if card is not None else {},
        "claims_held": claims_held_count(holder_id=reviewer_id(request)),
    }
    return render(request, f"{QUEUE_TEMPLATE}#claimed_response", context)


@tenant_view(REVIEW_PROMOTIONS)
@require_POST
def review_claim(request: ConsoleRequest, tenant: Tenant) -> HttpResponse:
    """Claim (or release) the requests posted: the focused row's ``c``, or the ticked ones.
    A request someone else holds stays theirs, and the answer says so."""
    form = ClaimForm(request.POST)
    back = _safe_next(request, _queue_url(tenant))
    if not form.is_valid():
        say_errors(request, form)
        if request.htmx:
            return _claimed_rows(request, tenant, [])
        return redirect(back)
    ids: list[uuid.UUID] = form.cleaned_data["requests"]
    claims_change(request, tenant, ids, claiming=form.cleaned_data["action"] == "claim")
    if request.htmx and request.POST.get("view") == "list":
        return _claimed_rows(request, tenant, ids)
    return redirect(back)


@tenant_view(REVIEW_PROMOTIONS)
@require_POST
def review_claim_batch(request: ConsoleRequest, tenant: Tenant) -> HttpResponse:
    """Claim the next requests the queue's filters match that no one else holds."""
    form = ClaimBatchForm(request.POST, reviewer_id=reviewer_id(request))
    return claim_batch(request, tenant, form, _queue_url(tenant), promotion_queue_selection)


@tenant_view(REVIEW_PROMOTIONS)
@require_POST
def review_release_all(request: ConsoleRequest, tenant: Tenant) -> HttpResponse:
    """Let go of every request the reviewer holds (end of a shift, a batch left half done)."""
    return release_all(request, tenant, _queue_url(tenant))


# --- "N new requests" -----------------------------------------------------------------------


def _arrivals_context(
    request: ConsoleRequest, tenant: Tenant, since: Cursor, **extra: Any
) -> dict[str, Any]:
    form = queue_filter_form(request, request.GET)
    filters = form.filters()
    in_list = request.GET.get("listed") != "no"
    query = with_query(
        "", form.query_for(), since=since.token(), **({} if in_list else {"listed": "no"})
    )
    slug = {"tenant_slug": tenant.slug}
    return {
        **_reviewer_context(request, tenant, "review"),
        "arrived": promotion_queue_arrivals(filters=filters, since=since),
        "arrivals_url": reverse("console:review-arrivals", kwargs=slug) + query,
        "arrival_rows_url": reverse("console:review-arrival-rows", kwargs=slug) + query,
        "listed": in_list,
        "results_url": with_query(_queue_url(tenant), form.query_for()),
        "count": promotion_queue_count(filters=filters),
        "count_limit": COUNT_LIMIT,
        "filtered": filters.active,
        "oob": True,
        **extra,
    }


def _since(request: ConsoleRequest) -> Cursor:
    """The page's mark; a damaged or missing one starts from now (nothing is "new")."""
    return Cursor.parse(request.GET.get("since", "")[:100]) or arrivals_mark()


@tenant_view(REVIEW_PROMOTIONS)
@require_GET
def review_arrivals(request: ConsoleRequest, tenant: Tenant) -> HttpResponse:
    """How many requests arrived since the page's mark (polled by the queue page), with the
    live count of the whole queue."""
    context = _arrivals_context(request, tenant, _since(request))
    return render(request, f"{QUEUE_TEMPLATE}#arrivals_response", context)


@tenant_view(REVIEW_PROMOTIONS)
@require_GET
def review_arrival_rows(request: ConsoleRequest, tenant: Tenant) -> HttpResponse:
    """The requests that arrived since the mark, as rows to add at the end of the list (the
    reviewer's place and focus stay), and the notice with the mark moved past them."""
    since = _since(request)
    form = queue_filter_form(request, request.GET)
    page = promotion_queue_page(filters=form.filters(), after=since, size=QUEUE_PAGE_SIZE)
    items: list[PromotionRequest] = page.items
    moved = Cursor(items[-1].requested_at, items[-1].pk) if items else since
    context = _arrivals_context(
        request,
        tenant,
        moved,
        rows=items,
        # The rows' decisions go back to (and count under) the page they are added to.
        next_url=page_shown(request),
        list_mode=True,
    )
    return render(request, f"{QUEUE_TEMPLATE}#arrival_rows_response", context)
