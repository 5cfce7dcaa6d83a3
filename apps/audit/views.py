"""Console: the tenant's audit log, filtered and paged, and the check of its hash chain."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET

from apps.tenancy.models import Tenant
from apps.tenancy.permissions import VIEW_AUDIT
from apps.tenancy.views import ConsoleRequest, render_page, tenant_view

from .forms import AuditFilterForm
from .selectors import audit_chain_verify, audit_event_page

AUDIT_PAGE_SIZE = 50


def _audit_context(request: ConsoleRequest, tenant: Tenant, **extra: Any) -> dict[str, Any]:
    form = AuditFilterForm(request.GET or None)
    base = reverse("console:audit", kwargs={"tenant_slug": tenant.slug})
    page = None
    newer_url = older_url = None
    if not form.is_bound or form.is_valid():
        cursors = form.cleaned_data if form.is_bound else {}
        page = audit_event_page(
            tenant=tenant,
            **form.filters(),
            before=cursors.get("before"),
            after=cursors.get("after"),
            size=AUDIT_PAGE_SIZE,
        )
        if page.newer_than is not None:
            newer_url = f"{base}?{form.query_for(after=page.newer_than)}"
        if page.older_than is not None:
            older_url = f"{base}?{form.query_for(before=page.older_than)}"
    filtered = form.is_bound and any(request.GET.get(name) for name in form.FILTER_FIELDS)
    return {
        "tenant": tenant,
        "section": "audit",
        "filter_form": form,
        "page": page,
        "filtered": filtered,
        "first_url": f"{base}?{form.query_for()}" if filtered else base,
        "newer_url": newer_url,
        "older_url": older_url,
        "known_actions": KNOWN_AUDIT_ACTIONS,
        **extra,
    }


# Suggestions for the action filter; any other value still works as a prefix.
KNOWN_AUDIT_ACTIONS = (
    "tenant.create",
    "membership.set",
    "membership.remove",
    "membership.restricted_grant",
    "membership.restricted_withdraw",
    "credential.issue",
    "credential.revoke",
    "platform.read",
    "platform.admin_tenant",
)


@tenant_view(VIEW_AUDIT)
@require_GET
def audit_log(request: ConsoleRequest, tenant: Tenant) -> HttpResponse:
    """The tenant's audit log, newest first, filtered and paged by sequence number."""
    return render_page(
        request, "console/audit.html", _audit_context(request, tenant), partial="audit_results"
    )


@tenant_view(VIEW_AUDIT)
@require_GET
def audit_verify(request: ConsoleRequest, tenant: Tenant) -> HttpResponse:
    """Recompute the tenant's hash chain and say whether (and where) it is broken."""
    check = audit_chain_verify()
    if request.htmx:
        return render(
            request, "console/audit.html#verify_result", {"tenant": tenant, "chain_check": check}
        )
    return render(request, "console/audit.html", _audit_context(request, tenant, chain_check=check))
