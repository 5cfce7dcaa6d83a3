"""``/console/``: sign-in, tenant switcher, dashboard and tenant administration."""

from __future__ import annotations

from django.urls import path

from . import views

app_name = "console"

urlpatterns = [
    path("", views.home, name="home"),
    path("login/", views.ConsoleLoginView.as_view(), name="login"),
    path("logout/", views.ConsoleLogoutView.as_view(), name="logout"),
    path("t/<slug:tenant_slug>/", views.dashboard, name="dashboard"),
]
