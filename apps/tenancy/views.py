"""Console: sign-in, tenant switcher and the tenant dashboard."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from .context import activate_tenant
from .permissions import VIEW_MEMORIES, has_tenant_perm
from .selectors import memberships_of, tenant_by_slug

View = Callable[..., HttpResponse]


def tenant_view(permission: str) -> Callable[[View], View]:
    """Resolve ``tenant_slug``, check ``permission`` (guardian), then set the tenant context.

    A tenant the person has no permission in is a 404, the same as one that does not exist.
    """

    def decorator(view: View) -> View:
        @login_required
        @wraps(view)
        def wrapper(
            request: HttpRequest, tenant_slug: str, *args: Any, **kwargs: Any
        ) -> HttpResponse:
            tenant = tenant_by_slug(tenant_slug)
            if tenant is None or not has_tenant_perm(request.user, tenant, permission):
                raise Http404("No such tenant")
            activate_tenant(tenant.pk)
            request.console_tenant = tenant  # type: ignore[attr-defined]
            request.console_memberships = memberships_of(request.user)  # type: ignore[attr-defined]
            return view(request, tenant, *args, **kwargs)

        return wrapper

    return decorator


class ConsoleLoginView(auth_views.LoginView):
    template_name = "console/login.html"
    redirect_authenticated_user = True


class ConsoleLogoutView(auth_views.LogoutView):
    pass


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """The tenants this person belongs to; straight to the dashboard when there is one."""
    memberships = memberships_of(request.user)
    if len(memberships) == 1:
        return redirect("console:dashboard", tenant_slug=memberships[0].tenant.slug)
    return render(request, "console/home.html", {"memberships": memberships})


@tenant_view(VIEW_MEMORIES)
def dashboard(request: HttpRequest, tenant: Any) -> HttpResponse:
    return render(request, "console/dashboard.html", {"tenant": tenant})
