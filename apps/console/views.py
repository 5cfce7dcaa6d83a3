"""Console shell: sign-in and out, the tenant switcher, the dashboard and the CSRF failure
page. Every area's pages live with their app (:mod:`apps.console.urls` gathers them)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET

from apps.tenancy.models import Tenant
from apps.tenancy.permissions import MANAGE_REVIEW, VIEW_AUDIT, VIEW_MEMORIES
from apps.tenancy.selectors import memberships_of
from apps.tenancy.views import UNSAVED_PARAMETER, ConsoleRequest, same_site_path, tenant_view

from .dashboard import dashboard_page, tenant_dashboard


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """CSRF_FAILURE_VIEW: the console's frame, what probably happened, and a way back to the
    page the form was on (only when that page is on this site)."""
    back = same_site_path(request, request.headers.get("Referer"))
    return render(
        request,
        "console/csrf_failure.html",
        {"back_url": back or reverse("console:home"), "back_is_form": back is not None},
        status=403,
    )


class ConsoleLoginView(auth_views.LoginView):
    template_name = "console/login.html"
    redirect_authenticated_user = True

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        # A change made after the session ended was refused: say so, or the person believes
        # their decision was saved when they come back to the page.
        source = self.request.POST if self.request.method == "POST" else self.request.GET
        context["unsaved"] = source.get(UNSAVED_PARAMETER) == "1"
        return context


class ConsoleLogoutView(auth_views.LogoutView):
    """POST only (Django's LogoutView refuses GET)."""


@login_required
@require_GET
def home(request: ConsoleRequest) -> HttpResponse:
    """The tenants this person belongs to; straight to the dashboard when there is one."""
    memberships = memberships_of(request.user)
    if len(memberships) == 1:
        return redirect("console:dashboard", tenant_slug=memberships[0].tenant.slug)
    request.console_memberships = memberships
    return render(request, "console/home.html", {"memberships": memberships})


@tenant_view(VIEW_MEMORIES)
@require_GET
def dashboard(request: ConsoleRequest, tenant: Tenant) -> HttpResponse:
    """The tenant at a glance: memories by trust and sensitivity, what expires soon, and what
    waits for a person (reviews, conflicts, overdue obligations), each linked to its page."""
    figures = tenant_dashboard(
        tenant=tenant,
        include_audit=VIEW_AUDIT in request.console_perms,
        include_review=MANAGE_REVIEW in request.console_perms,
    )
    page = dashboard_page(tenant=tenant, perms=request.console_perms, figures=figures.memory)
    context = {"tenant": tenant, "dashboard": figures, "page": page, "section": "dashboard"}
    return render(request, "console/dashboard.html", context)
