"""The product's routes plus the retrieval benchmark's bare DRF endpoint (benchmark only)."""

from __future__ import annotations

from benchmarks.retrieval_search import bare_search_urlpatterns
from memoryconsole.urls import urlpatterns as product_urlpatterns

urlpatterns = [*product_urlpatterns, *bare_search_urlpatterns()]

handler400 = "apps.core.problems.handler400"
handler403 = "apps.core.problems.handler403"
handler404 = "apps.core.problems.handler404"
handler500 = "apps.core.problems.handler500"
