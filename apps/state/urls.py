"""Routes of the state app under ``/api/v1/``."""

from __future__ import annotations

from django.urls import path

from . import api

urlpatterns = [
    path("runs", api.RunListCreateView.as_view(), name="api-runs"),
    path("runs/<str:run_id>", api.RunDetailView.as_view(), name="api-run"),
    path(
        "runs/<str:run_id>/episodes",
        api.EpisodeListCreateView.as_view(),
        name="api-run-episodes",
    ),
    path(
        "runs/<str:run_id>/checkpoints",
        api.CheckpointCreateView.as_view(),
        name="api-run-checkpoints",
    ),
    path(
        "runs/<str:run_id>/checkpoints/latest",
        api.CheckpointLatestView.as_view(),
        name="api-run-checkpoint-latest",
    ),
    path("runs/<str:run_id>/close", api.RunCloseView.as_view(), name="api-run-close"),
    path("obligations", api.ObligationListCreateView.as_view(), name="api-obligations"),
    path(
        "obligations/<str:obligation_id>",
        api.ObligationDetailView.as_view(),
        name="api-obligation",
    ),
    path(
        "obligations/<str:obligation_id>/commit",
        api.ObligationCommitView.as_view(),
        name="api-obligation-commit",
    ),
    path(
        "obligations/<str:obligation_id>/fail",
        api.ObligationFailView.as_view(),
        name="api-obligation-fail",
    ),
    path(
        "obligations/<str:obligation_id>/cancel",
        api.ObligationCancelView.as_view(),
        name="api-obligation-cancel",
    ),
]
