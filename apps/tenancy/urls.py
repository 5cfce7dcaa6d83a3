"""``/console/``: sign-in, tenant switcher, dashboard and tenant administration.

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
    path("t/<slug:tenant_slug>/credentials/", views.credentials, name="credentials"),
    path(
        "t/<slug:tenant_slug>/credentials/new/",
        views.credential_issue_form,
        name="credential-issue-form",
    ),
    path(
        "t/<slug:tenant_slug>/credentials/<uuid:credential_id>/revoke/",
        views.credential_revoke_view,
        name="credential-revoke",
    ),
    path("t/<slug:tenant_slug>/members/", views.members, name="members"),
    path(
        "t/<slug:tenant_slug>/members/<uuid:membership_id>/role/",
        views.member_role,
        name="member-role",
    ),
    path(
        "t/<slug:tenant_slug>/members/<uuid:membership_id>/remove/",
        views.member_remove,
        name="member-remove",
    ),
    path("t/<slug:tenant_slug>/audit/", views.audit_log, name="audit"),
    path("t/<slug:tenant_slug>/audit/verify/", views.audit_verify, name="audit-verify"),
    # Each area's pages live with its app; their URL names join this namespace.
    path("t/<slug:tenant_slug>/", include("apps.records.console_memories_urls")),
    path("t/<slug:tenant_slug>/", include("apps.records.console_review_urls")),
    path("t/<slug:tenant_slug>/", include("apps.governance.console_urls")),
    path("t/<slug:tenant_slug>/", include("apps.state.console_urls")),
    path("t/<slug:tenant_slug>/", include("apps.evaluation.console_urls")),
]
