"""Console routes of this area, included under ``/console/t/<tenant_slug>/`` in the ``console``
namespace (apps/tenancy/urls.py)."""

from __future__ import annotations

from django.urls import URLPattern, path

from .views import governance

urlpatterns: list[URLPattern] = [
    path("retention/", governance.retention, name="retention"),
    path("holds/", governance.holds, name="holds"),
    path("holds/<uuid:hold_id>/lift/", governance.hold_lift, name="hold-lift"),
]
