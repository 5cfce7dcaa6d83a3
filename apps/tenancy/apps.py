from __future__ import annotations

from django.apps import AppConfig


class TenancyConfig(AppConfig):
    name = "apps.tenancy"
    label = "tenancy"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.models.signals import post_migrate

        from . import grants

        # Runs as the owner after every migrate: (re)grant the application role its rights.
        post_migrate.connect(grants.grant_application_role, dispatch_uid="tenancy-grants")
