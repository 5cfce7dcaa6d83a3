from __future__ import annotations

from django.apps import AppConfig


class CoreConfig(AppConfig):
    """What every other app builds on: the domain error family and its one problem+json
    mapping, actors, keyset pagination and the shared validation primitives. It imports no
    other app of the product."""

    name = "apps.core"
    label = "core"
