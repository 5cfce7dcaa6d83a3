from __future__ import annotations

from django.apps import AppConfig


class MemoryConsoleConfig(AppConfig):
    name = "memoryconsole"
    verbose_name = "Memory Console"

    def ready(self) -> None:
        # Connects the worker's record of each scheduled task's success (celery's
        # task_success signal); it reads the models, so only once they are loaded.
        from . import scheduled  # noqa: F401
