from __future__ import annotations

from django.apps import AppConfig


class StateConfig(AppConfig):
    name = "apps.state"
    label = "state"
    verbose_name = "State: runs, episodes, checkpoints, obligations"

    def ready(self) -> None:
        # The app registry is ready only now: the selectors import the models.
        from apps.records.services import session_run_check_register

        from .selectors import run_open_locked

        session_run_check_register(run_open_locked)
