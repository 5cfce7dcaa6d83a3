"""Console routes of this area, included under ``/console/t/<tenant_slug>/`` in the ``console``
namespace (apps/console/urls.py)."""

from __future__ import annotations

from django.urls import URLPattern, path

from . import views

urlpatterns: list[URLPattern] = [
    path("deletions/", views.deletions, name="deletions"),
    path("deletions/<uuid:receipt_id>/", views.deletion, name="deletion"),
    path("deletions/<uuid:receipt_id>/verify/", views.deletion_verify, name="deletion-verify"),
    path("erasures/", views.erasures, name="erasures"),
    path("erasures/start/", views.erasure_start, name="erasure-start"),
    path("erasures/<uuid:job_id>/", views.erasure_job, name="erasure-job"),
]
