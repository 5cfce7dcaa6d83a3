from __future__ import annotations

from django.apps import AppConfig


class StateConfig(AppConfig):
    name = "apps.state"
    label = "state"
    verbose_name = "State: runs, episodes, checkpoints, obligations"
