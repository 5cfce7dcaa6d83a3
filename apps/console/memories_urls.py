"""Console routes of this area, included under ``/console/t/<tenant_slug>/`` in the ``console``
namespace (apps/console/urls.py)."""

from __future__ import annotations

from django.urls import URLPattern, path

from . import memories

urlpatterns: list[URLPattern] = [
    path("memories/", memories.memories, name="memories"),
    path("memories/<uuid:record_id>/", memories.memory, name="memory"),
    path("memories/subjects/<str:subject>/", memories.subject, name="memory-subject"),
    path("memories/scopes/", memories.scopes, name="memory-scopes"),
    path("memories/<uuid:record_id>/delete/", memories.memory_delete, name="memory-delete"),
    path("memories/<uuid:record_id>/redact/", memories.memory_redact, name="memory-redact"),
    path("receipts/<uuid:receipt_id>/", memories.receipt, name="receipt"),
]
