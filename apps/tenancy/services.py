"""Changes to tenants, memberships and agent credentials. Each one is audited."""

from __future__ import annotations

import secrets
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from apps.core.actors import Actor
from apps.core.errors import Invalid

from .audit_trail import audit_record
from .context import tenant_scope
from .models import (
    DEFAULT_ACTIONS,
    TOKEN_PREFIX,
    Action,
    AgentCredential,
    AuditReads,
    Membership,
    Role,
    Tenant,
    hash_token,
)
from .permissions import sync_role_permissions


def parse_actions(raw: str | list[str] | tuple[str, ...] | None) -> list[str]:
    """Validate a list (or comma-separated string) of credential actions."""
    if raw is None:
        return list(DEFAULT_ACTIONS)
    items = [a.strip() for a in raw.split(",")] if isinstance(raw, str) else list(raw)
    items = [a for a in items if a]
    unknown = sorted(set(items) - set(Action.values))
    if unknown:
        raise Invalid(
            f"unknown action(s): {', '.join(unknown)}; choose from {', '.join(Action.values)}",
            field="actions",
        )
    if not items:
        raise Invalid("at least one action is required", field="actions")
    return sorted(set(items), key=Action.values.index)


@transaction.atomic
def tenant_create(*, slug: str, name: str = "", actor: Actor | None = None) -> Tenant:
    """Create a tenant and open its audit chain."""
    tenant = Tenant(slug=slug, name=name or slug)
    try:
        tenant.full_clean()
    except ValidationError as error:
        # The model's own checks (a slug's form, a taken slug), refused as every rule is.
        messages = [message for field in error.message_dict.values() for message in field]
        raise Invalid(" ".join(messages), errors=error.message_dict) from error
    tenant.save()
    with tenant_scope(tenant.pk):
        audit_record(
            tenant=tenant,
            actor=actor or Actor.system("create-tenant"),
            action="tenant.create",
            object_type="tenant",
            object_id=str(tenant.pk),
            data={"slug": tenant.slug},
        )
        return tenant


LAST_ADMIN_MESSAGE = "A tenant needs at least one admin: make another member an admin first."


def _ensure_another_admin(membership: Membership, *, field: str | None) -> None:
    """Refuse a change that would leave the tenant without an admin.

    Locks every admin membership of the tenant, so two admins demoting or removing each other
    at the same time are serialised and the second one is refused.
    """
    admins = list(
        Membership.objects.select_for_update()
        .filter(tenant_id=membership.tenant_id, role=Role.ADMIN)
        .values_list("pk", flat=True)
    )
    if admins == [membership.pk]:
        raise Invalid(LAST_ADMIN_MESSAGE, field=field)


@transaction.atomic
def membership_set(*, tenant: Tenant, user: Any, role: str, actor: Actor) -> Membership:
    """Give ``user`` ``role`` in ``tenant`` (creating or changing the membership)."""
    if role not in Role.values:
        raise Invalid(f"unknown role {role!r}", field="role")
    with tenant_scope(tenant.pk):
        membership = Membership.objects.select_for_update().filter(tenant=tenant, user=user).first()
        previous = membership.role if membership else None
        if membership is not None and previous == Role.ADMIN and role != Role.ADMIN:
            _ensure_another_admin(membership, field="role")
        if membership is None:
            membership = Membership.objects.create(tenant=tenant, user=user, role=role)
        elif membership.role != role:
            # A new role starts from its own permissions: a grant beyond the old one ends.
            membership.role = role
            membership.sees_restricted = False
            membership.save(update_fields=["role", "sees_restricted"])
        sync_role_permissions(user, tenant, role, sees_restricted=membership.sees_restricted)
        audit_record(
            tenant=tenant,
            actor=actor,
            action="membership.set",
            object_type="membership",
            object_id=str(membership.pk),
            data={"user": user.pk, "role": role, "previous_role": previous},
        )
        return membership


@transaction.atomic
def membership_restricted_set(*, membership: Membership, granted: bool, actor: Actor) -> Membership:
    """Grant (or withdraw) restricted memories to a member or auditor beyond their role.

    Admins and reviewers see them by role, so a grant to them changes nothing and is refused,
    as is one that would be no change: the audit log holds only real changes."""
    with tenant_scope(membership.tenant_id):
        locked = Membership.objects.select_for_update().select_related("user").get(pk=membership.pk)
        if locked.role in (Role.ADMIN, Role.REVIEWER):
            raise Invalid(f"{locked.get_role_display()}s see restricted memories by their role.")
        if locked.sees_restricted == granted:
            return locked
        locked.sees_restricted = granted
        locked.save(update_fields=["sees_restricted"])
        sync_role_permissions(locked.user, membership.tenant, locked.role, sees_restricted=granted)
        audit_record(
            tenant=membership.tenant,
            actor=actor,
            action="membership.restricted_grant" if granted else "membership.restricted_withdraw",
            object_type="membership",
            object_id=str(locked.pk),
            data={"user": locked.user_id, "role": locked.role},
        )
        return locked


@transaction.atomic
def membership_remove(*, membership: Membership, actor: Actor) -> None:
    """Remove a membership and its permissions. Refuses to remove a tenant's last admin."""
    with tenant_scope(membership.tenant_id):
        # The role as it is now (locked), not as the caller last saw it.
        current_role = (
            Membership.objects.select_for_update()
            .filter(pk=membership.pk)
            .values_list("role", flat=True)
            .first()
        )
        if current_role == Role.ADMIN:
            _ensure_another_admin(membership, field=None)
        sync_role_permissions(membership.user, membership.tenant, None)
        audit_record(
            tenant=membership.tenant,
            actor=actor,
            action="membership.remove",
            object_type="membership",
            object_id=str(membership.pk),
            data={"user": membership.user_id, "role": membership.role},
        )
        membership.delete()


@transaction.atomic
def credential_issue(
    *,
    tenant: Tenant,
    name: str,
    actions: list[str] | str | None = None,
    sees_restricted: bool = True,
    actor: Actor,
    created_by: Any = None,
) -> tuple[AgentCredential, str]:
    """Issue an agent credential. Returns it with the token, which is never retrievable again.

    ``sees_restricted``: whether its reads include memories of the restricted class (an agent
    credential is the tenant's own service, so by default they do)."""
    name = (name or "").strip()
    if not name:
        raise Invalid("a credential needs a name", field="name")
    chosen = parse_actions(actions)
    with tenant_scope(tenant.pk):
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        credential = AgentCredential.objects.create(
            tenant=tenant,
            name=name[:100],
            token_hash=hash_token(token),
            token_prefix=token[:10],
            actions=chosen,
            sees_restricted=bool(sees_restricted),
            created_by=created_by,
        )
        audit_record(
            tenant=tenant,
            actor=actor,
            action="credential.issue",
            object_type="credential",
            object_id=str(credential.pk),
            data={"actions": chosen, "sees_restricted": credential.sees_restricted},
        )
        return credential, token


@transaction.atomic
def credential_revoke(
    *, credential: AgentCredential, actor: Actor, reason: str, revoked_by: Any = None
) -> None:
    """Revoke a credential, for a non-empty ``reason``; requests with its token get 401 from
    now on. Revoking a revoked credential changes nothing."""
    if not isinstance(reason, str) or not reason.strip():
        raise Invalid("Say why the credential is revoked.", field="reason")
    with tenant_scope(credential.tenant_id):
        locked = AgentCredential.objects.select_for_update().get(pk=credential.pk)
        if locked.revoked_at is not None:
            return
        locked.revoked_at = timezone.now()
        locked.revoked_by = revoked_by
        locked.save(update_fields=["revoked_at", "revoked_by"])
        credential.revoked_at = locked.revoked_at
        audit_record(
            tenant=locked.tenant,
            actor=actor,
            action="credential.revoke",
            object_type="credential",
            object_id=str(locked.pk),
            data={"reason": reason, "target": {"credential": str(locked.pk), "name": locked.name}},
        )


# The tenant's trust and read-audit policy, as the console's settings page edits it.
POLICY_FIELDS = ("auto_promote_on_second_observation", "promotion_requires_person", "audit_reads")


@transaction.atomic
def tenant_policy_set(
    *,
    tenant: Tenant,
    actor: Actor,
    auto_promote_on_second_observation: bool,
    promotion_requires_person: bool,
    audit_reads: str,
) -> Tenant:
    """Set how records are confirmed and which reads are audited; audited with what changed.

    Refused (:class:`~apps.core.errors.Invalid`, nothing changed): an unknown ``audit_reads``, and
    confirming on a second observation while promotions need a person (the two contradict:
    no person would take part)."""
    if audit_reads not in AuditReads.values:
        raise Invalid(f"Choose one of {', '.join(AuditReads.values)}.", field="audit_reads")
    if auto_promote_on_second_observation and promotion_requires_person:
        raise Invalid(
            "A second observation cannot confirm a record at once while promotions need a "
            "person: untick one of the two.",
            field="auto_promote_on_second_observation",
        )
    locked = Tenant.objects.select_for_update().get(pk=tenant.pk)
    before = {name: getattr(locked, name) for name in POLICY_FIELDS}
    locked.auto_promote_on_second_observation = auto_promote_on_second_observation
    locked.promotion_requires_person = promotion_requires_person
    locked.audit_reads = audit_reads
    after = {name: getattr(locked, name) for name in POLICY_FIELDS}
    changed = [name for name in POLICY_FIELDS if before[name] != after[name]]
    if not changed:
        return locked
    locked.save(update_fields=changed)
    audit_record(
        tenant=locked,
        actor=actor,
        action="tenant.policy",
        object_type="tenant",
        object_id=str(locked.pk),
        data={
            "before": {name: before[name] for name in changed},
            "after": {name: after[name] for name in changed},
        },
    )
    return locked
