"""Routes of the evaluation app under ``/api/v1/``."""

from __future__ import annotations

from django.urls import path

from . import api

urlpatterns = [
    path(
        "evaluation/decisions-at-risk",
        api.DecisionsAtRiskView.as_view(),
        name="api-decisions-at-risk",
    ),
    path("evaluation/runs", api.EvaluationRunListView.as_view(), name="api-evaluation-runs"),
    path(
        "evaluation/runs/<str:run_id>",
        api.EvaluationRunDetailView.as_view(),
        name="api-evaluation-run",
    ),
]
