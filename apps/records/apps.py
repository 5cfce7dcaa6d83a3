from __future__ import annotations

from django.apps import AppConfig


class RecordsConfig(AppConfig):
    name = "apps.records"
    label = "records"

    def ready(self) -> None:
        # The app registry is ready only now: the selectors import the models.
        from apps.api.idempotency import expiry_check_register

        from .selectors import expired_since

        expiry_check_register(expired_since)
