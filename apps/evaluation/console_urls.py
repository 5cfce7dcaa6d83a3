"""Console routes of this area, included under ``/console/t/<tenant_slug>/`` in the ``console``
namespace (apps/console/urls.py)."""

from __future__ import annotations

from django.urls import URLPattern, path

from . import views

urlpatterns: list[URLPattern] = [
    path("evaluation/", views.evaluation, name="evaluation"),
    path("evaluation/start/", views.evaluation_start, name="evaluation-start"),
    path("evaluation/runs/<uuid:run_id>/", views.evaluation_run, name="evaluation-run"),
    path("decisions-at-risk/", views.decisions_at_risk, name="decisions-at-risk"),
]
