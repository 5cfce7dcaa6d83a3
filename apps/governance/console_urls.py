"""Console routes of this area, included under ``/console/t/<tenant_slug>/`` in the ``console``
namespace (apps/console/urls.py)."""

from __future__ import annotations

from django.urls import URLPattern, path

from . import views, views_policies

urlpatterns: list[URLPattern] = [
    path("retention/", views_policies.retention, name="retention"),
    path("holds/", views_policies.holds, name="holds"),
    path("holds/<uuid:hold_id>/lift/", views_policies.hold_lift, name="hold-lift"),
    path("deletions/", views.deletions, name="deletions"),
    path("deletions/<uuid:receipt_id>/", views.deletion, name="deletion"),
    path("deletions/<uuid:receipt_id>/verify/", views.deletion_verify, name="deletion-verify"),
    path("erasures/", views.erasures, name="erasures"),
    path("erasures/start/", views.erasure_start, name="erasure-start"),
    path("erasures/<uuid:job_id>/", views.erasure_job, name="erasure-job"),
]
