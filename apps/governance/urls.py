"""Routes of the governance app under ``/api/v1/``."""

from __future__ import annotations

from django.urls import path

from . import api
from .export_api import SubjectExportView

urlpatterns = [
    path("records/<str:record_id>", api.RecordView.as_view(), name="api-record"),
    path("erasures", api.ErasureView.as_view(), name="api-erasures"),
    path("erasures/<str:job_id>", api.ErasureJobView.as_view(), name="api-erasure"),
    path("deletion-receipts", api.DeletionReceiptListView.as_view(), name="api-receipts"),
    path(
        "deletion-receipts/<str:receipt_id>",
        api.DeletionReceiptDetailView.as_view(),
        name="api-receipt",
    ),
    path("subjects/<path:subject>/export", SubjectExportView.as_view(), name="api-subject-export"),
    path(
        "consents/<str:consent_ref>/revoke",
        api.ConsentRevokeView.as_view(),
        name="api-consent-revoke",
    ),
]
