"""Django admin for platform operators (superusers), under row-level security like everything.

Tenant tables (memberships, credentials, audit events) show rows only inside a tenant context,
and the admin has none by default. An operator picks one: on the Tenants list, select a tenant
and run the action "Work in this tenant". That stores the tenant in the operator's session and
appends a ``platform.admin_tenant`` event to *that tenant's* audit chain, so the tenant can see
who looked and when. From then on every admin page of a tenant table
(:class:`TenantContextAdmin`) activates that tenant for its request's transaction;
"Stop working in a tenant" (a link in the admin header) forgets it.

Changes still go through the services, so they are validated and audited like the console's.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import QuerySet
from django.forms import ModelForm
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect
from django.urls import URLPattern, path

from apps.core.actors import Actor

from .audit_trail import audit_record
from .context import activate_tenant, tenant_scope
from .models import AgentCredential, Membership, Role, Tenant
from .selectors import membership_admin_count, parse_uuid
from .services import (
    LAST_ADMIN_MESSAGE,
    credential_revoke,
    membership_remove,
    membership_set,
    tenant_create,
)

SESSION_TENANT_ID = "admin_tenant_id"
SESSION_TENANT_SLUG = "admin_tenant_slug"


@transaction.atomic
def admin_tenant_enter(*, request: HttpRequest, tenant: Tenant) -> None:
    """Make ``tenant`` the admin's working tenant for this session, recorded in its audit log."""
    with tenant_scope(tenant.pk):
        audit_record(
            tenant=tenant,
            actor=Actor.for_user(request.user),
            action="platform.admin_tenant",
            object_type="tenant",
            object_id=str(tenant.pk),
            data={"via": "django-admin"},
        )
    request.session[SESSION_TENANT_ID] = str(tenant.pk)
    request.session[SESSION_TENANT_SLUG] = tenant.slug


def admin_tenant_leave(request: HttpRequest) -> None:
    request.session.pop(SESSION_TENANT_ID, None)
    request.session.pop(SESSION_TENANT_SLUG, None)


def admin_tenant(request: HttpRequest) -> Tenant | None:
    """The tenant this superuser chose to work in, if any (and if it still exists)."""
    if not getattr(request.user, "is_superuser", False):
        return None
    raw = request.session.get(SESSION_TENANT_ID)
    tenant_id = parse_uuid(raw) if raw else None
    return Tenant.objects.filter(pk=tenant_id).first() if tenant_id else None


class TenantContextAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """The ModelAdmin of a tenant table: activate the session's working tenant per request.

    Without one, RLS shows nothing and the page says how to choose a tenant.
    """

    def _enter_context(self, request: HttpRequest) -> Tenant | None:
        tenant = admin_tenant(request)
        if tenant is None:
            messages.warning(
                request,
                "No tenant chosen, so tenant rows are hidden (row-level security). "
                "Go to Tenants, select one and run “Work in this tenant”.",
            )
            return None
        # Inside the request's transaction (ATOMIC_REQUESTS): gone when it ends.
        activate_tenant(tenant.pk)
        request.admin_tenant = tenant  # type: ignore[attr-defined]
        return tenant

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        self._enter_context(request)
        return super().changelist_view(request, extra_context)

    def changeform_view(
        self,
        request: HttpRequest,
        object_id: str | None = None,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        self._enter_context(request)
        return super().changeform_view(request, object_id, form_url, extra_context)

    def delete_view(
        self, request: HttpRequest, object_id: str, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        self._enter_context(request)
        return super().delete_view(request, object_id, extra_context)

    def history_view(
        self, request: HttpRequest, object_id: str, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        self._enter_context(request)
        return super().history_view(request, object_id, extra_context)


def _working_tenant(request: HttpRequest) -> Tenant:
    tenant: Tenant | None = getattr(request, "admin_tenant", None)
    if tenant is None:
        raise ValidationError("Choose a tenant first (Tenants → “Work in this tenant”).")
    return tenant


# --- tenants -----------------------------------------------------------------------------------


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ("slug", "name", "created_at")
    search_fields = ("slug", "name")
    ordering = ("slug",)
    actions = ("work_in_tenant",)

    def get_fields(self, request: HttpRequest, obj: Tenant | None = None) -> Any:
        # Created by ``tenant_create`` (slug and name); later settings have their own services.
        if obj is None:
            return ("slug", "name")
        return [field.name for field in Tenant._meta.fields]

    def get_readonly_fields(self, request: HttpRequest, obj: Tenant | None = None) -> Any:
        # No service changes a tenant here (so none would be audited): read-only once created.
        return [field.name for field in Tenant._meta.fields] if obj else ()

    def has_delete_permission(self, request: HttpRequest, obj: Tenant | None = None) -> bool:
        return False  # every tenant table protects its tenant; offboarding is a process

    def save_model(self, request: HttpRequest, obj: Tenant, form: Any, change: bool) -> None:
        if change:
            return
        created = tenant_create(slug=obj.slug, name=obj.name, actor=Actor.for_user(request.user))
        obj.pk, obj.created_at = created.pk, created.created_at

    def has_work_in_tenant_permission(self, request: HttpRequest) -> bool:
        return bool(getattr(request.user, "is_superuser", False))

    @admin.action(description="Work in this tenant", permissions=["work_in_tenant"])
    def work_in_tenant(self, request: HttpRequest, queryset: QuerySet[Tenant]) -> None:
        tenants = list(queryset[:2])
        if len(tenants) != 1:
            self.message_user(request, "Select exactly one tenant.", messages.ERROR)
            return
        admin_tenant_enter(request=request, tenant=tenants[0])
        self.message_user(
            request,
            f"Now working in {tenants[0].slug}: its memberships, credentials and audit events are "
            "visible. This was recorded in the tenant's audit log.",
            messages.SUCCESS,
        )

    def get_urls(self) -> list[URLPattern]:
        leave = path(
            "leave/",
            self.admin_site.admin_view(self.leave_view),
            name="tenancy_tenant_leave",
        )
        return [leave, *super().get_urls()]

    def leave_view(self, request: HttpRequest) -> HttpResponseRedirect:
        if request.method != "POST":
            return redirect("admin:tenancy_tenant_changelist")
        admin_tenant_leave(request)
        self.message_user(request, "No longer working in a tenant.", messages.SUCCESS)
        return redirect("admin:tenancy_tenant_changelist")


# --- memberships ---------------------------------------------------------------------------------


class MembershipAdminForm(ModelForm):  # type: ignore[type-arg]
    class Meta:
        model = Membership
        fields = ("user", "role")

    def clean_role(self) -> str:
        role: str = self.cleaned_data["role"]
        instance = self.instance
        if (
            instance.pk
            and instance.role == Role.ADMIN
            and role != Role.ADMIN
            and membership_admin_count(tenant=instance.tenant) <= 1
        ):
            raise ValidationError(LAST_ADMIN_MESSAGE)
        return role


@admin.register(Membership)
class MembershipAdmin(TenantContextAdmin):
    form = MembershipAdminForm
    list_display = ("user", "role", "created_at")
    list_filter = ("role",)
    search_fields = ("user__username",)
    list_select_related = ("user",)
    raw_id_fields = ("user",)

    def get_readonly_fields(self, request: HttpRequest, obj: Membership | None = None) -> Any:
        return ("user", "created_at") if obj else ("created_at",)

    def get_actions(self, request: HttpRequest) -> Any:
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)  # one at a time, through the service's checks
        return actions

    def has_add_permission(self, request: HttpRequest) -> bool:
        return getattr(request, "admin_tenant", None) is not None and super().has_add_permission(
            request
        )

    def has_delete_permission(self, request: HttpRequest, obj: Membership | None = None) -> bool:
        if (
            obj is not None
            and obj.role == Role.ADMIN
            and membership_admin_count(tenant=obj.tenant) <= 1
        ):
            return False  # the tenant's last admin
        return super().has_delete_permission(request, obj)

    def save_model(self, request: HttpRequest, obj: Membership, form: Any, change: bool) -> None:
        tenant = _working_tenant(request)
        saved = membership_set(
            tenant=tenant, user=obj.user, role=obj.role, actor=Actor.for_user(request.user)
        )
        obj.pk, obj.tenant, obj.created_at = saved.pk, tenant, saved.created_at

    def delete_model(self, request: HttpRequest, obj: Membership) -> None:
        membership_remove(membership=obj, actor=Actor.for_user(request.user))


# --- agent credentials ---------------------------------------------------------------------------


@admin.register(AgentCredential)
class AgentCredentialAdmin(TenantContextAdmin):
    """Read-only, plus a revoke action. Issue credentials in the console: a token is shown once."""

    list_display = (
        "name",
        "token_prefix",
        "actions",
        "sees_restricted",
        "created_at",
        "last_used_at",
        "revoked_at",
    )
    list_select_related = ("created_by", "revoked_by")
    search_fields = ("name", "token_prefix")
    actions = ("revoke_selected",)
    exclude = ("token_hash",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(
        self, request: HttpRequest, obj: AgentCredential | None = None
    ) -> bool:
        return False  # view only; the one change, revoking, is the action below

    def has_delete_permission(
        self, request: HttpRequest, obj: AgentCredential | None = None
    ) -> bool:
        return False  # revoke instead: the record (and its audit trail) stays

    def has_revoke_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm("tenancy.change_agentcredential"))

    @admin.action(description="Revoke selected credentials", permissions=["revoke"])
    def revoke_selected(self, request: HttpRequest, queryset: QuerySet[AgentCredential]) -> None:
        actor = Actor.for_user(request.user)
        revoked = 0
        for credential in queryset.filter(revoked_at__isnull=True):
            # The admin's bulk action has no form to ask with; the console's revoke page asks.
            credential_revoke(
                credential=credential,
                actor=actor,
                reason="revoked with the Django admin action",
                revoked_by=request.user,
            )
            revoked += 1
        self.message_user(request, f"Revoked {revoked} credential(s).", messages.SUCCESS)
