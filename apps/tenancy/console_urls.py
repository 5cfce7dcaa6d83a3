"""Console routes of tenant administration (agent credentials, members, the tenant's policy),
included under ``/console/t/<tenant_slug>/`` in the ``console`` namespace
(apps/console/urls.py)."""

from __future__ import annotations

from django.urls import URLPattern, path

from . import views, views_settings

urlpatterns: list[URLPattern] = [
    path("credentials/", views.credentials, name="credentials"),
    path("credentials/new/", views.credential_issue_form, name="credential-issue-form"),
    path(
        "credentials/<uuid:credential_id>/revoke/",
        views.credential_revoke_view,
        name="credential-revoke",
    ),
    path("members/", views.members, name="members"),
    path("settings/", views_settings.tenant_settings, name="settings"),
    path("members/<uuid:membership_id>/role/", views.member_role, name="member-role"),
    path("members/<uuid:membership_id>/remove/", views.member_remove, name="member-remove"),
    path(
        "members/<uuid:membership_id>/restricted/",
        views.member_restricted,
        name="member-restricted",
    ),
]
