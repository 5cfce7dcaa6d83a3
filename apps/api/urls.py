"""``/api/v1/`` routes of the contract's own views: the credential itself and the audit log
(the health endpoint is the project's: memoryconsole/health.py). Every other app's routes are
included beside these in memoryconsole/urls.py."""

from __future__ import annotations

from django.urls import path

from . import views
from .audit_events import AuditEventDetailView, AuditEventListView

urlpatterns = [
    path("me", views.MeView.as_view(), name="api-me"),
    path("audit-events", AuditEventListView.as_view(), name="api-audit-events"),
    path("audit-events/<str:event_id>", AuditEventDetailView.as_view(), name="api-audit-event"),
]
