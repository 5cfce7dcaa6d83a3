from __future__ import annotations

from django.urls import path

from . import api

urlpatterns = [path("search", api.SearchView.as_view(), name="api-search")]
