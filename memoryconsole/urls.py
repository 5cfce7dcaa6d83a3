"""Top-level routes: console, admin, API, schema and docs, and the operators' metrics."""

from __future__ import annotations

from django.contrib import admin
from django.shortcuts import redirect
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from .health import health, health_live, health_ready
from .metrics import metrics

urlpatterns = [
    path("", lambda request: redirect("console:home"), name="root"),
    path("console/", include("apps.console.urls")),
    path("admin/", admin.site.urls),
    path("api/v1/health", health, name="api-health"),
    path("api/v1/health/ready", health_ready, name="api-health-ready"),
    path("api/v1/health/live", health_live, name="api-health-live"),
    path("api/v1/", include("apps.api.urls")),
    path("api/v1/", include("apps.records.urls")),
    path("api/v1/", include("apps.review.urls")),
    path("api/v1/", include("apps.derivations.urls")),
    path("api/v1/", include("apps.retrieval.urls")),
    path("api/v1/", include("apps.state.urls")),
    path("api/v1/", include("apps.governance.urls")),
    path("api/v1/", include("apps.evaluation.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="swagger-ui"),
    # Prometheus' default path; not part of the agent API (its own access rule).
    path("metrics", metrics, name="metrics"),
]

handler400 = "apps.core.problems.handler400"
handler403 = "apps.core.problems.handler403"
handler404 = "apps.core.problems.handler404"
handler500 = "apps.core.problems.handler500"
