"""Console: retention rules per sensitivity class, and legal holds. Administrators
(``manage_retention``) change them through the services the Django admin uses, which audit
every change; auditors (``view_audit``) read them.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.template.defaultfilters import pluralize
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from apps.audit.services import Actor
from apps.core.errors import DomainError, form_add_error
from apps.records.models import DEFAULT_RETENTION, SENSITIVITY_ORDER, LegalHold, RetentionRule
from apps.records.selectors import record_get
from apps.records.services import RecordError
from apps.tenancy.models import Tenant
from apps.tenancy.permissions import MANAGE_RETENTION, VIEW_AUDIT, VIEW_MEMORIES, VIEW_RESTRICTED
from apps.tenancy.views import (
    ConsoleRequest,
    form_nonce_consume,
    form_nonce_issue,
    render_page,
    tenant_view,
)

from .forms_policies import (
    LegalHoldFilterForm,
    LegalHoldLiftForm,
    LegalHoldPlaceForm,
    RetentionRuleForm,
    duration_text,
    duration_words,
)
from .services import RetentionChange, legal_hold_lift, legal_hold_place, retention_rule_set
from .views import keyset_page

HOLDS_PAGE_SIZE = 50


def _require_read(request: ConsoleRequest) -> None:
    if not request.console_perms & {MANAGE_RETENTION, VIEW_AUDIT}:
        raise PermissionDenied("Your role in this tenant does not allow this page.")


def _require_manage(request: ConsoleRequest) -> None:
    if MANAGE_RETENTION not in request.console_perms:
        raise PermissionDenied("Your role may read retention and holds, not change them.")


# --- retention rules ------------------------------------------------------------------------------


@dataclass
class RetentionRow:
    """A sensitivity class with its rule in force (the tenant's, or the default), in words."""

    sensitivity: str
    provisional_words: str
    confirmed_words: str
    customised: bool
    default_words: str
    form: RetentionRuleForm | None = None
    saved: bool = False
    # A change awaiting confirmation: what it would do to the records already written.
    preview: RetentionChange | None = None
    preview_changed: bool = False

    @property
    def preview_words(self) -> str:
        if self.preview is None:
            return ""
        return _limits_words(self.preview.provisional_max, self.preview.confirmed_max)


def _limits_words(provisional: timedelta, confirmed: timedelta | None) -> str:
    return f"{duration_words(provisional)} / {duration_words(confirmed)}"


def _retention_rows(
    request: ConsoleRequest, bound: RetentionRuleForm | None = None, saved: str = ""
) -> list[RetentionRow]:
    rules = {rule.sensitivity: rule for rule in RetentionRule.objects.all()}
    manage = MANAGE_RETENTION in request.console_perms
    rows = []
    for sensitivity in SENSITIVITY_ORDER:
        default = DEFAULT_RETENTION[sensitivity]
        rule = rules.get(sensitivity)
        provisional, confirmed = (rule.provisional_max, rule.confirmed_max) if rule else default
        row = RetentionRow(
            sensitivity=sensitivity,
            provisional_words=duration_words(provisional),
            confirmed_words=duration_words(confirmed),
            customised=rule is not None,
            default_words=_limits_words(*default),
            saved=saved == sensitivity,
        )
        if manage:
            if bound is not None and bound.data.get("sensitivity") == sensitivity:
                row.form = bound
            else:
                row.form = RetentionRuleForm(
                    initial={
                        "sensitivity": sensitivity,
                        "provisional_max": duration_text(provisional),
                        "confirmed_max": duration_text(confirmed),
                    },
                    auto_id=f"id_{sensitivity}_%s",
                )
        rows.append(row)
    return rows


def _retention_context(request: ConsoleRequest, tenant: Tenant, **extra: Any) -> dict[str, Any]:
    return {
        "tenant": tenant,
        "section": "retention",
        "can_manage": MANAGE_RETENTION in request.console_perms,
        **extra,
    }


@tenant_view(VIEW_MEMORIES)
@require_http_methods(["GET", "POST"])
def retention(request: ConsoleRequest, tenant: Tenant) -> HttpResponse:
    """The rule of each sensitivity class; POST changes one class (htmx: its row)."""
    _require_read(request)
    template = "console/governance/retention.html"
    if request.method != "POST":
        rows = _retention_rows(request)
        return render(request, template, _retention_context(request, tenant, rows=rows))
    _require_manage(request)
    data = request.POST
    form = RetentionRuleForm(data, auto_id=f"id_{data.get('sensitivity', 'x')}_%s")
    change: RetentionChange | None = None
    preview: RetentionChange | None = None
    preview_changed = False
    if form.is_valid():
        limits = ("sensitivity", "provisional_max", "confirmed_max")
        rule = {name: form.cleaned_data[name] for name in limits}
        rule.update(tenant=tenant, actor=Actor.for_user(request.user))
        try:
            preview = retention_rule_set(**rule, dry_run=True)
            confirmed = form.previewed_counts()
            if preview.affects_existing and confirmed != (preview.expired, preview.shortened):
                # Shown first, and again when the records affected changed since it was shown.
                preview_changed = confirmed is not None
            else:
                change = retention_rule_set(**rule, reason=form.cleaned_data["reason"])
        except DomainError as error:
            form_add_error(form, error)
    sensitivity = str(data.get("sensitivity", ""))
    if change is not None:
        saved = f"{sensitivity.capitalize()}: saved. New writes and promotions use it"
        if change.affects_existing:
            saved += (
                f"; {change.expired} record{pluralize(change.expired)} expired now and "
                f"{change.shortened} will expire sooner."
            )
        else:
            saved += "; no record already written lives longer than it allows."
        messages.success(request, saved)
        if not request.htmx:
            return redirect("console:retention", tenant_slug=tenant.slug)
        rows = _retention_rows(request, saved=sensitivity)
    else:
        rows = _retention_rows(request, bound=form)
    context = _retention_context(request, tenant, rows=rows)
    row = next((r for r in rows if r.sensitivity == sensitivity), None)
    awaiting = preview is not None and change is None and preview.affects_existing
    if row is not None and awaiting:
        row.preview, row.preview_changed = preview, preview_changed
    status = 200 if change is not None or (awaiting and not form.errors) else 400
    if request.htmx and row is not None:
        return render(request, f"{template}#rule_row_response", {**context, "row": row})
    return render(request, template, context, status=status)


# --- legal holds ------------------------------------------------------------------------------


def _holds_context(
    request: ConsoleRequest, tenant: Tenant, *, place_form: LegalHoldPlaceForm | None = None
) -> dict[str, Any]:
    filter_form = LegalHoldFilterForm(request.GET or None)
    base = reverse("console:holds", kwargs={"tenant_slug": tenant.slug})
    holds: list[LegalHold] = []
    older_url = None
    valid = not filter_form.is_bound or filter_form.is_valid()
    state = filter_form.cleaned_data.get("state", "active") if filter_form.is_bound else "active"
    if valid:
        queryset = LegalHold.objects.select_related("fact")
        if state == "active":
            queryset = queryset.active()
        elif state == "lifted":
            queryset = queryset.lifted()
        holds, older_url = keyset_page(queryset, filter_form, base, "placed_at", HOLDS_PAGE_SIZE)
    can_manage = MANAGE_RETENTION in request.console_perms
    if can_manage and place_form is None:
        place_form = LegalHoldPlaceForm(initial={"nonce": form_nonce_issue(request)})
    paged = valid and filter_form.is_bound and bool(filter_form.cleaned_data.get("before"))
    return {
        "tenant": tenant,
        "section": "holds",
        "can_manage": can_manage,
        "filter_form": filter_form,
        "state": state,
        "holds": holds,
        "paged": paged,
        "first_url": f"{base}?{filter_form.query_for()}",
        "older_url": older_url,
        "place_form": place_form,
    }


@tenant_view(VIEW_MEMORIES)
@require_http_methods(["GET", "POST"])
def holds(request: ConsoleRequest, tenant: Tenant) -> HttpResponse:
    """Legal holds, newest first; POST places one on a subject or on a record's fact."""
    _require_read(request)
    template = "console/governance/holds.html"
    if request.method != "POST":
        return render_page(
            request, template, _holds_context(request, tenant), partial="hold_results"
        )
    _require_manage(request)
    form = LegalHoldPlaceForm(request.POST)
    fact = None
    if form.is_valid() and form.cleaned_data["target"] == "record":
        record = record_get(
            form.cleaned_data["record_id"],
            sees_restricted=VIEW_RESTRICTED in request.console_perms,
        )
        if record is None:
            form.add_error("value", f"No live record with this id in {tenant.name}.")
        else:
            fact = record.fact
    if form.is_valid():
        if not form_nonce_consume(request, form.cleaned_data["nonce"]):
            messages.info(request, "That hold was already placed; it is listed below.")
            return _back_to_holds(request, tenant)
        try:
            hold = legal_hold_place(
                tenant=tenant,
                actor=Actor.for_user(request.user),
                reason=form.cleaned_data["reason"],
                subject=form.cleaned_data["value"] if fact is None else "",
                fact=fact,
            )
        except RecordError as error:
            form.add_error(None, str(error))
        else:
            target = f"subject “{hold.subject}”" if hold.subject else "the record's fact"
            messages.success(
                request, f"Placed a legal hold on {target}: it can no longer expire or be deleted."
            )
            return _back_to_holds(request, tenant)
    context = _holds_context(request, tenant, place_form=form)
    if request.htmx:
        return render(request, f"{template}#place_panel", context)
    return render(request, template, context, status=400)


def _back_to_holds(request: ConsoleRequest, tenant: Tenant) -> HttpResponse:
    """After a change: the refreshed list and a fresh form (htmx), or a redirect (PRG)."""
    if not request.htmx:
        return redirect("console:holds", tenant_slug=tenant.slug)
    return render(
        request,
        "console/governance/holds.html#holds_changed_response",
        _holds_context(request, tenant),
    )


def _hold_or_404(hold_id: uuid.UUID, *, lock: bool = False) -> LegalHold:
    queryset = LegalHold.objects.select_related("fact")
    if lock:
        # Two lifts of one hold (a double click) queue here; the second sees it lifted.
        queryset = queryset.select_for_update(of=("self",))
    hold = queryset.filter(pk=hold_id).first()
    if hold is None:
        raise Http404("No such legal hold")
    return hold


@tenant_view(MANAGE_RETENTION)
@require_http_methods(["GET", "POST"])
def hold_lift(request: ConsoleRequest, tenant: Tenant, hold_id: uuid.UUID) -> HttpResponse:
    """GET: the confirmation page, asking why. POST: lift with that reason; repeating is
    harmless. Without a reason the page comes back with the form error and nothing changes."""
    template = "console/governance/hold_lift.html"
    hold = _hold_or_404(hold_id, lock=request.method == "POST")
    context = {"tenant": tenant, "section": "holds", "hold": hold, "form": LegalHoldLiftForm()}
    if request.method != "POST":
        return render(request, template, context)
    form = LegalHoldLiftForm(request.POST)
    if hold.lifted_at is None and not form.is_valid():
        return render(request, template, {**context, "form": form}, status=400)
    if hold.lifted_at is None:
        legal_hold_lift(
            hold=hold, actor=Actor.for_user(request.user), reason=form.cleaned_data["reason"]
        )
        messages.success(request, "Lifted the hold: its facts follow their retention again.")
    else:
        messages.info(request, "That hold was already lifted.")
    if not request.htmx:
        return redirect("console:holds", tenant_slug=tenant.slug)
    return render(
        request,
        "console/governance/holds.html#hold_row_response",
        {"tenant": tenant, "section": "holds", "hold": hold, "can_manage": True},
    )
