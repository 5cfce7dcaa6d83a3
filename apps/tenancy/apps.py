from __future__ import annotations

from django.apps import AppConfig


class TenancyConfig(AppConfig):
    name = "apps.tenancy"
    label = "tenancy"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.backends.signals import connection_created
        from django.db.models.signals import post_migrate

        from . import grants, prepared

        # Runs as the owner after every migrate: (re)grant the application role its rights.
        post_migrate.connect(grants.grant_application_role, dispatch_uid="tenancy-grants")
        # Statements prepared on the server are planned once per connection.
        connection_created.connect(prepared.plan_generically, dispatch_uid="tenancy-plans")
