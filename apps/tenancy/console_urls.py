"""Console routes of tenant administration (agent credentials, members), included under
``/console/t/<tenant_slug>/`` in the ``console`` namespace (apps/console/urls.py)."""

from __future__ import annotations

from django.urls import URLPattern, path

from . import views

urlpatterns: list[URLPattern] = [
    path("credentials/", views.credentials, name="credentials"),
    path("credentials/new/", views.credential_issue_form, name="credential-issue-form"),
    path(
        "credentials/<uuid:credential_id>/revoke/",
        views.credential_revoke_view,
        name="credential-revoke",
    ),
    path("members/", views.members, name="members"),
    path("members/<uuid:membership_id>/role/", views.member_role, name="member-role"),
    path("members/<uuid:membership_id>/remove/", views.member_remove, name="member-remove"),
    path(
        "members/<uuid:membership_id>/restricted/",
        views.member_restricted,
        name="member-restricted",
    ),
]
