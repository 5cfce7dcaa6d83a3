"""``/console/``: sign-in, tenant switcher and dashboard, and every area's pages.

The navigation (``context_processors.NAVIGATION``) links the console's sections by URL name in
this namespace; a section whose name is not routed yet is shown as plain, disabled text.
"""

from __future__ import annotations

from django.urls import include, path

from . import views

app_name = "console"

urlpatterns = [
    path("", views.home, name="home"),
    path("login/", views.ConsoleLoginView.as_view(), name="login"),
    path("logout/", views.ConsoleLogoutView.as_view(), name="logout"),
    path("t/<slug:tenant_slug>/", views.dashboard, name="dashboard"),
    # Each area's pages live with its app; their URL names join this namespace.
    path("t/<slug:tenant_slug>/", include("apps.tenancy.console_urls")),
    path("t/<slug:tenant_slug>/", include("apps.audit.console_urls")),
    path("t/<slug:tenant_slug>/", include("apps.console.memories_urls")),
    path("t/<slug:tenant_slug>/", include("apps.review.console_urls")),
    path("t/<slug:tenant_slug>/", include("apps.governance.console_urls")),
    path("t/<slug:tenant_slug>/", include("apps.state.console_urls")),
    path("t/<slug:tenant_slug>/", include("apps.evaluation.console_urls")),
]
