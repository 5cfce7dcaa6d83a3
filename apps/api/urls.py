"""``/api/v1/``: each app contributes its routes here."""

from __future__ import annotations

from django.urls import include, path

from apps.audit.api import AuditEventDetailView, AuditEventListView

from . import views

urlpatterns = [
    path("health", views.health, name="api-health"),
    path("me", views.MeView.as_view(), name="api-me"),
    path("audit-events", AuditEventListView.as_view(), name="api-audit-events"),
    path("audit-events/<str:event_id>", AuditEventDetailView.as_view(), name="api-audit-event"),
    path("", include("apps.records.urls")),
    path("", include("apps.derivations.urls")),
    path("", include("apps.retrieval.urls")),
    path("", include("apps.state.urls")),
    path("", include("apps.governance.urls")),
    path("", include("apps.evaluation.urls")),
]
