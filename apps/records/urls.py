"""Routes of the records app under ``/api/v1/``."""

from __future__ import annotations

from django.urls import path

from . import api

urlpatterns = [
    path("records", api.RecordListCreateView.as_view(), name="api-records"),
    path("records/<str:record_id>", api.RecordDetailView.as_view(), name="api-record"),
    path(
        "records/<str:record_id>/history",
        api.RecordHistoryView.as_view(),
        name="api-record-history",
    ),
    path(
        "records/<str:record_id>/promotion-requests",
        api.RecordPromotionRequestView.as_view(),
        name="api-record-promotion-requests",
    ),
    path("promotion-requests", api.PromotionRequestListView.as_view(), name="api-promotions"),
    path(
        "promotion-requests/<str:request_id>/approve",
        api.PromotionApproveView.as_view(),
        name="api-promotion-approve",
    ),
    path(
        "promotion-requests/<str:request_id>/reject",
        api.PromotionRejectView.as_view(),
        name="api-promotion-reject",
    ),
    path("conflicts", api.ConflictListView.as_view(), name="api-conflicts"),
    path(
        "conflicts/<str:conflict_id>/resolve",
        api.ConflictResolveView.as_view(),
        name="api-conflict-resolve",
    ),
    path("facts", api.FactsView.as_view(), name="api-facts"),
    path("facts/check", api.FactCheckView.as_view(), name="api-facts-check"),
]
