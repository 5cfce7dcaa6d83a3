from __future__ import annotations

from django.apps import AppConfig
from django.core import checks

from .contracts import contracts_check


class CoreConfig(AppConfig):
    """What every other app builds on: the domain error family and its one problem+json
    mapping, actors, keyset pagination, the shared validation primitives and the contracts
    lower apps send to higher ones. It imports no other app of the product."""

    name = "apps.core"
    label = "core"

    def ready(self) -> None:
        # Start-up fails when a contract the product requires has no receiver.
        checks.register(contracts_check)
