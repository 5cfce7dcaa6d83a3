"""Console: what a review lead (permission ``manage_review``) sets and watches. The tenant's
canned reasons and claim length (:mod:`apps.review.reasons`, audited), and each reviewer's
throughput (:mod:`apps.records.throughput`)."""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.core.actors import Actor
from apps.review.forms import ClaimDurationForm, ReviewReasonForm
from apps.review.models import REVIEW_REASONS_PER_DECISION, ReasonDecision, ReviewReason
from apps.review.reasons import (
    ReasonError,
    review_claim_duration_set,
    review_reason_add,
    review_reason_get,
    review_reason_move_up,
    review_reason_remove,
    review_reasons,
)
from apps.review.throughput import WINDOW, review_throughput
from apps.tenancy.models import Tenant
from apps.tenancy.permissions import MANAGE_REVIEW
from apps.tenancy.views import ConsoleRequest, tenant_view

SETTINGS_TEMPLATE = "console/review/settings.html"
THROUGHPUT_TEMPLATE = "console/review/throughput.html"


def _settings_context(
    tenant: Tenant,
    *,
    reason_form: ReviewReasonForm | None = None,
    duration_form: ClaimDurationForm | None = None,
) -> dict[str, Any]:
    reasons = review_reasons()
    minutes = int(tenant.review_claim_duration.total_seconds() // 60)
    return {
        "tenant": tenant,
        "section": "review-settings",
        "reasons_by_decision": [
            (decision, label, [reason for reason in reasons if reason.decision == decision])
            for decision, label in ReasonDecision.choices
        ],
        "reasons_limit": REVIEW_REASONS_PER_DECISION,
        "reason_form": reason_form or ReviewReasonForm(),
        "duration_form": duration_form or ClaimDurationForm(initial={"claim_minutes": minutes}),
        "claim_minutes": minutes,
    }


@tenant_view(MANAGE_REVIEW)
@require_http_methods(["GET", "POST"])
def review_settings(request: ConsoleRequest, tenant: Tenant) -> HttpResponse:
    """The tenant's canned reasons and claim length; POST adds a canned reason."""
    if request.method != "POST":
        return render(request, SETTINGS_TEMPLATE, _settings_context(tenant))
    form = ReviewReasonForm(request.POST)
    if form.is_valid():
        try:
            reason = review_reason_add(
                tenant=tenant,
                decision=form.cleaned_data["decision"],
                text=form.cleaned_data["text"],
                actor=Actor.for_user(request.user),
            )
        except ReasonError as error:
            form.add_error(error.field if error.field in form.fields else None, str(error))
        else:
            messages.success(
                request,
                f"Added “{reason.text}” for {reason.get_decision_display().lower()}, "
                f"on key {reason.position}.",
            )
            return redirect("console:review-settings", tenant_slug=tenant.slug)
    return render(
        request, SETTINGS_TEMPLATE, _settings_context(tenant, reason_form=form), status=400
    )


@tenant_view(MANAGE_REVIEW)
@require_POST
def review_claim_duration(request: ConsoleRequest, tenant: Tenant) -> HttpResponse:
    """Set how long a claim lasts (claims already taken keep their end)."""
    form = ClaimDurationForm(request.POST)
    if form.is_valid():
        try:
            review_claim_duration_set(
                tenant=tenant, duration=form.duration(), actor=Actor.for_user(request.user)
            )
        except ReasonError as error:
            form.add_error("claim_minutes", str(error))
        else:
            messages.success(
                request, f"A claim now lasts {form.cleaned_data['claim_minutes']} minutes."
            )
            return redirect("console:review-settings", tenant_slug=tenant.slug)
    return render(
        request, SETTINGS_TEMPLATE, _settings_context(tenant, duration_form=form), status=400
    )


def _reason_or_404(reason_id: uuid.UUID) -> ReviewReason:
    found = review_reason_get(reason_id)
    if found is None:
        raise Http404("No such canned reason")
    return found


@tenant_view(MANAGE_REVIEW)
@require_POST
def review_reason_remove_view(
    request: ConsoleRequest, tenant: Tenant, reason_id: uuid.UUID
) -> HttpResponse:
    """Remove a canned reason (the ones after it move up a key)."""
    reason = _reason_or_404(reason_id)
    review_reason_remove(tenant=tenant, reason=reason, actor=Actor.for_user(request.user))
    messages.success(request, f"Removed “{reason.text}”. Past decisions keep their reason.")
    return redirect("console:review-settings", tenant_slug=tenant.slug)


@tenant_view(MANAGE_REVIEW)
@require_POST
def review_reason_move_view(
    request: ConsoleRequest, tenant: Tenant, reason_id: uuid.UUID
) -> HttpResponse:
    """Move a canned reason one key up."""
    reason = _reason_or_404(reason_id)
    try:
        moved = review_reason_move_up(
            tenant=tenant, reason=reason, actor=Actor.for_user(request.user)
        )
    except ReasonError as error:
        messages.error(request, str(error))
    else:
        messages.success(request, f"“{moved.text}” is now on key {moved.position}.")
    return redirect("console:review-settings", tenant_slug=tenant.slug)


@tenant_view(MANAGE_REVIEW)
@require_GET
def review_throughput_view(request: ConsoleRequest, tenant: Tenant) -> HttpResponse:
    """Each reviewer's decisions over the last hour, day and week, and their pace."""
    rows = review_throughput()
    totals = {
        name: sum(getattr(row, name) for row in rows)
        for name in ("last_hour", "last_day", "last_week", "reversals")
    }
    context = {"rows": rows, "window_days": WINDOW.days, "totals": totals}
    return render(
        request,
        THROUGHPUT_TEMPLATE,
        {"tenant": tenant, "section": "review-throughput", **context},
    )
