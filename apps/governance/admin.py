"""Retention rules and legal holds in the Django admin, inside the admin's working tenant,
changed through the governance services, so every change is validated and audited."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.forms import ModelForm
from django.http import HttpRequest

from apps.core.actors import Actor
from apps.governance.services import legal_hold_lift, legal_hold_place, retention_rule_set
from apps.records.models import LegalHold, LegalHoldQuerySet, RetentionRule
from apps.tenancy.admin import TenantContextAdmin, admin_tenant


@admin.register(RetentionRule)
class RetentionRuleAdmin(TenantContextAdmin):
    list_display = ("sensitivity", "provisional_max", "confirmed_max", "updated_at")
    fields = ("sensitivity", "provisional_max", "confirmed_max")
    ordering = ("sensitivity",)

    def save_model(
        self, request: HttpRequest, obj: RetentionRule, form: ModelForm[Any], change: bool
    ) -> None:
        tenant = admin_tenant(request)
        if tenant is None:
            raise ValidationError("Choose a tenant first (Tenants → Work in this tenant).")
        retention_rule_set(
            tenant=tenant,
            sensitivity=obj.sensitivity,
            provisional_max=obj.provisional_max,
            confirmed_max=obj.confirmed_max,
            actor=Actor.for_user(request.user),
            # The admin form has no reason field; the console asks for one.
            reason="set in the Django admin",
        )

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # a class always has a rule (the default when no row exists)


@admin.register(LegalHold)
class LegalHoldAdmin(TenantContextAdmin):
    list_display = ("subject", "fact", "reason", "placed_by_label", "placed_at", "lifted_at")
    fields = ("subject", "reason")
    list_filter = ("lifted_at",)
    search_fields = ("subject", "reason")
    actions = ("lift_holds",)

    def save_model(
        self, request: HttpRequest, obj: LegalHold, form: ModelForm[Any], change: bool
    ) -> None:
        tenant = admin_tenant(request)
        if tenant is None or change:
            raise ValidationError("Holds are placed in a chosen tenant and lifted, not edited.")
        placed = legal_hold_place(
            tenant=tenant,
            actor=Actor.for_user(request.user),
            reason=obj.reason,
            subject=obj.subject,
        )
        obj.pk = placed.pk

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return obj is None

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.action(description="Lift the selected holds")
    def lift_holds(self, request: HttpRequest, queryset: LegalHoldQuerySet) -> None:
        actor = Actor.for_user(request.user)
        for hold in queryset.active():
            # The admin's bulk action has no form to ask with; the console's lift page asks.
            legal_hold_lift(hold=hold, actor=actor, reason="lifted with the Django admin action")
        messages.success(request, "Holds lifted.")
