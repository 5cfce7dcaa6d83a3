from __future__ import annotations

from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    """The console shell: navigation, sign-in, the tenant switcher and the dashboard. It is
    the top layer: it may import every app, and no app imports it."""

    name = "apps.console"
    label = "console"
