"""The product's routes plus the review benchmark's bare baselines (benchmark only)."""

from __future__ import annotations

from benchmarks.review_queue import bare_urlpatterns
from memoryconsole.urls import urlpatterns as product_urlpatterns

urlpatterns = [*product_urlpatterns, *bare_urlpatterns()]
