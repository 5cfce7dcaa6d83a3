from __future__ import annotations

from django.apps import AppConfig


class DerivationsConfig(AppConfig):
    name = "apps.derivations"
    label = "derivations"
