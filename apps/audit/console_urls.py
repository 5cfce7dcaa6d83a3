"""Console routes of the audit log, included under ``/console/t/<tenant_slug>/`` in the
``console`` namespace (apps/console/urls.py)."""

from __future__ import annotations

from django.urls import URLPattern, path

from . import views

urlpatterns: list[URLPattern] = [
    path("audit/", views.audit_log, name="audit"),
    path("audit/verify/", views.audit_verify, name="audit-verify"),
]
