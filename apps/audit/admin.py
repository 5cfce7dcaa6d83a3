"""Audit events in the Django admin: read-only, inside the admin's working tenant.

The application role cannot update or delete audit rows anyway (append-only grants); the admin
does not offer to.
"""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from apps.tenancy.admin import TenantContextAdmin

from .models import AuditEvent


@admin.register(AuditEvent)
class AuditEventAdmin(TenantContextAdmin):
    list_display = (
        "seq",
        "occurred_at",
        "actor_type",
        "actor_label",
        "action",
        "object_type",
        "object_id",
    )
    list_filter = ("actor_type",)
    search_fields = ("action", "object_id", "actor_label", "actor_id")
    ordering = ("-seq",)
    show_full_result_count = False  # no second COUNT(*) over a long log

    def get_readonly_fields(self, request: HttpRequest, obj: AuditEvent | None = None) -> list[str]:
        return [field.name for field in self.model._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: AuditEvent | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: AuditEvent | None = None) -> bool:
        return False
