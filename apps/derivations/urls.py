"""Routes of the derivations app under ``/api/v1/``."""

from __future__ import annotations

from django.urls import path

from . import api

urlpatterns = [
    path("summaries", api.SummaryCreateView.as_view(), name="api-summaries"),
    path("summaries/<str:summary_id>", api.SummaryDetailView.as_view(), name="api-summary"),
    path(
        "records/<str:record_id>/redact", api.RecordRedactView.as_view(), name="api-record-redact"
    ),
]
