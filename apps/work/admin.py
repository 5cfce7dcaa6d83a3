"""Outbox rows in the Django admin: dead letters (and their last error) are visible here."""

from __future__ import annotations

from django.contrib import admin

from apps.tenancy.admin import TenantContextAdmin

from .models import OutboxMessage


@admin.register(OutboxMessage)
class OutboxMessageAdmin(TenantContextAdmin):
    list_display = (
        "created_at",
        "task_name",
        "object_id",
        "state",
        "attempts",
        "published_at",
        "available_at",
    )
    list_filter = ("state", "task_name")
    search_fields = ("object_id", "last_error")
    ordering = ("-created_at",)
    readonly_fields = (
        "task_name",
        "payload",
        "object_id",
        "attempts",
        "last_error",
        "created_at",
        "published_at",
        "finished_at",
        "available_at",
    )
