from __future__ import annotations

from django.apps import AppConfig


class DerivationsConfig(AppConfig):
    name = "apps.derivations"
    label = "derivations"

    def ready(self) -> None:
        # Connects what the lower apps ask of derived data; only now, as it imports the models.
        from . import receivers  # noqa: F401
