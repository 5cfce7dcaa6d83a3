"""Routes of the records app under ``/api/v1/``."""

from __future__ import annotations

from django.urls import path

from . import api, batch_api

urlpatterns = [
    path("records", api.RecordListCreateView.as_view(), name="api-records"),
    # Before governance's records/<id>, which would take "batch" for an id.
    path("records/batch", batch_api.RecordBatchView.as_view(), name="api-records-batch"),
    # records/<id> (read and delete) is routed by governance, which owns deletion.
    path(
        "records/<str:record_id>/history",
        api.RecordHistoryView.as_view(),
        name="api-record-history",
    ),
    path("facts", api.FactsView.as_view(), name="api-facts"),
    path("facts/check", api.FactCheckView.as_view(), name="api-facts-check"),
]
