"""Routes of the state app under ``/api/v1/``."""

from __future__ import annotations

from django.urls import path

from . import api

RUN = "runs/<str:run_id>"
OBLIGATION = "obligations/<str:obligation_id>"

urlpatterns = [
    path("runs", api.RunListCreateView.as_view(), name="api-runs"),
    path(RUN, api.RunDetailView.as_view(), name="api-run"),
    path(f"{RUN}/episodes", api.EpisodeListCreateView.as_view(), name="api-run-episodes"),
    path(f"{RUN}/checkpoints", api.CheckpointCreateView.as_view(), name="api-run-checkpoints"),
    path(
        f"{RUN}/checkpoints/latest",
        api.CheckpointLatestView.as_view(),
        name="api-run-checkpoint-latest",
    ),
    path(f"{RUN}/close", api.RunCloseView.as_view(), name="api-run-close"),
    path("obligations", api.ObligationListCreateView.as_view(), name="api-obligations"),
    path(OBLIGATION, api.ObligationDetailView.as_view(), name="api-obligation"),
    path(f"{OBLIGATION}/commit", api.ObligationCommitView.as_view(), name="api-obligation-commit"),
    path(f"{OBLIGATION}/fail", api.ObligationFailView.as_view(), name="api-obligation-fail"),
    path(f"{OBLIGATION}/cancel", api.ObligationCancelView.as_view(), name="api-obligation-cancel"),
]
