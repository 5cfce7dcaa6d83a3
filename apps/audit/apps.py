from __future__ import annotations

from django.apps import AppConfig


class AuditConfig(AppConfig):
    name = "apps.audit"
    label = "audit"

    def ready(self) -> None:
        # Tenancy, below audit, appends its changes through the hook (apps/tenancy/audit_trail.py).
        from apps.tenancy.audit_trail import audit_append_register

        from .services import audit_record

        audit_append_register(audit_record)
