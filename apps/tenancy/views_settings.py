"""Console: the tenant's trust and read-audit policy (how records are confirmed, which reads
are audited).

Like the retention rules, a tenant-wide policy: administrators (``manage_retention``) change
it, auditors (``view_audit``) read it. The change goes through ``tenant_policy_set``, which
checks the rules between the settings and audits what changed.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from apps.core.actors import Actor
from apps.core.errors import DomainError, form_add_error

from .forms import TenantPolicyForm
from .models import Tenant
from .permissions import MANAGE_RETENTION, VIEW_AUDIT
from .services import POLICY_FIELDS, tenant_policy_set
from .views import ConsoleRequest, tenant_view

TEMPLATE = "console/settings.html"


def _context(request: ConsoleRequest, tenant: Tenant, form: TenantPolicyForm) -> dict[str, Any]:
    return {
        "tenant": tenant,
        "section": "settings",
        "form": form,
        "may_change": MANAGE_RETENTION in request.console_perms,
    }


@tenant_view(MANAGE_RETENTION, VIEW_AUDIT)
@require_http_methods(["GET", "POST"])
def tenant_settings(request: ConsoleRequest, tenant: Tenant) -> HttpResponse:
    """The policy, with its form for administrators; POST saves it."""
    if request.method != "POST":
        initial = {name: getattr(tenant, name) for name in POLICY_FIELDS}
        return render(
            request, TEMPLATE, _context(request, tenant, TenantPolicyForm(initial=initial))
        )
    if MANAGE_RETENTION not in request.console_perms:
        raise PermissionDenied("Only an administrator may change the tenant's policy.")
    form = TenantPolicyForm(request.POST)
    if form.is_valid():
        try:
            tenant_policy_set(
                tenant=tenant, actor=Actor.for_user(request.user), **form.cleaned_data
            )
        except DomainError as error:
            form_add_error(form, error)
        else:
            messages.success(request, "Saved the tenant's policy.")
            return redirect("console:settings", tenant_slug=tenant.slug)
    return render(request, TEMPLATE, _context(request, tenant, form), status=400)
