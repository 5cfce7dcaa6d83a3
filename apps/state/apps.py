from __future__ import annotations

from django.apps import AppConfig


class StateConfig(AppConfig):
    name = "apps.state"
    label = "state"
    verbose_name = "State: runs, episodes, checkpoints, obligations"

    def ready(self) -> None:
        # Connects what the lower apps ask of runs; only now, as it imports the models.
        from . import receivers  # noqa: F401
