from __future__ import annotations

from django.apps import AppConfig


class RecordsConfig(AppConfig):
    name = "apps.records"
    label = "records"

    def ready(self) -> None:
        # Connects what the API layer asks of records; only now, as it imports the models.
        from . import receivers  # noqa: F401
