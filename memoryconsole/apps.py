from __future__ import annotations

from django.apps import AppConfig


class MemoryConsoleConfig(AppConfig):
    name = "memoryconsole"
    verbose_name = "Memory Console"
