from __future__ import annotations

from django.apps import AppConfig


class AuditConfig(AppConfig):
    name = "apps.audit"
    label = "audit"

    def ready(self) -> None:
        # Connects the chain to tenancy's changes; only now, as it imports the models.
        from . import receivers  # noqa: F401
