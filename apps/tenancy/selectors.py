"""Reads of tenants, memberships and credentials, and the console's reads of the audit log."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta
from functools import cache
from typing import Any, TypeVar

from django.db import connection, transaction
from django.db.models import QuerySet
from django.utils import timezone
from guardian.core import ObjectPermissionChecker

from apps.core.actors import Actor

from .audit_trail import audit_record
from .context import (
    TENANT_SETTING,
    TOKEN_HASH_SETTING,
    USER_SETTING,
    TenantContextError,
    expose_credential_lookup,
    expose_memberships_of,
    tenant_activated,
    tenant_scope,
)
from .models import TOKEN_PREFIX, AgentCredential, Membership, Role, Tenant, hash_token
from .permissions import ALL_PERMISSIONS

T = TypeVar("T")

# last_used_at is written at most this often per credential, to keep reads read-only.
LAST_USED_RESOLUTION = timedelta(minutes=1)


def _columns(model: type[Any], alias: str) -> str:
    return ", ".join(f'{alias}."{f.column}"' for f in model._meta.concrete_fields)


@cache
def _activating_lookup_sql() -> str:
    """The credential (with its tenant) whose token hashes to the parameter, entering the
    credential's tenant in the select list, so only for a row that is returned."""
    return (
        f"SELECT {_columns(AgentCredential, 'c')}, {_columns(Tenant, 't')}, "  # noqa: S608 (model columns)
        f"set_config('{TENANT_SETTING}', c.tenant_id::text, true) "
        'FROM "tenancy_agentcredential" c JOIN "tenancy_tenant" t ON t.id = c.tenant_id '
        "WHERE c.token_hash = %s AND c.revoked_at IS NULL"
    )


def _from_row(model: type[Any], values: Sequence[Any]) -> Any:
    fields = model._meta.concrete_fields
    converted = [
        f.from_db_value(v, None, connection) if hasattr(f, "from_db_value") else v
        for f, v in zip(fields, values, strict=True)
    ]
    return model.from_db(connection.alias, [f.attname for f in fields], converted)


def credential_for_token(token: str, *, activate: bool = False) -> AgentCredential | None:
    """The active credential ``token`` belongs to, or None. Must run inside a transaction.

    ``activate``: also make the credential's tenant the transaction's tenant, in the same
    statement (an API request's authentication: one round trip fewer).
    """

    if not token.startswith(TOKEN_PREFIX) or len(token) > 200:
        return None
    digest = hash_token(token)
    if activate:
        if not connection.in_atomic_block:
            raise TenantContextError("a credential is looked up inside a transaction")
        # A revoked credential's row is not returned, so its tenant is never entered. The
        # setting that lets the transaction see this one credential goes first: the lookup's
        # row-level security policy reads it. Both in one round trip where parameters are
        # bound on the client (Django's default): one query string of two statements, which
        # the server runs in order; the cursor then moves on to the lookup's rows.
        expose = "SELECT set_config(%s, %s, true)"
        with connection.cursor() as cursor:
            if connection.settings_dict["OPTIONS"].get("server_side_binding"):
                cursor.execute(expose, [TOKEN_HASH_SETTING, digest])
                cursor.execute(_activating_lookup_sql(), [digest])
            else:
                cursor.execute(
                    f"{expose}; {_activating_lookup_sql()}", [TOKEN_HASH_SETTING, digest, digest]
                )
                cursor.nextset()
            row = cursor.fetchone()
        if row is None:
            return None
        width = len(AgentCredential._meta.concrete_fields)
        credential: AgentCredential = _from_row(AgentCredential, row[:width])
        credential.tenant = _from_row(Tenant, row[width:-1])
        tenant_activated(credential.tenant_id)
        return credential
    expose_credential_lookup(digest)
    found = AgentCredential.objects.select_related("tenant").filter(token_hash=digest).first()
    if found is None or found.revoked_at is not None:
        return None
    return found


def credential_touch(credential: AgentCredential) -> None:
    """Record use, at most once a minute (under the credential's tenant context)."""
    now = timezone.now()
    if credential.last_used_at is None or now - credential.last_used_at > LAST_USED_RESOLUTION:
        # SKIP LOCKED: the row lock lasts until the request commits; a concurrent request of
        # the same credential must not queue behind it just to stamp the same minute.
        unlocked = AgentCredential.objects.filter(pk=credential.pk).select_for_update(
            skip_locked=True
        )
        AgentCredential.objects.filter(pk__in=unlocked.values("pk")).update(last_used_at=now)
        credential.last_used_at = now


def memberships_of(user: Any) -> list[Membership]:
    """Every tenant ``user`` belongs to, across tenants (for the tenant switcher).

    The cross-tenant view of the person's own memberships is withdrawn again before returning:
    otherwise every later ``Membership`` query in the same transaction (say, a tenant's member
    list) would also see this person's memberships in other tenants.
    """
    if not user.is_authenticated:
        return []
    expose_memberships_of(user.pk)
    try:
        return list(
            Membership.objects.filter(user=user).select_related("tenant").order_by("tenant__slug")
        )
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT set_config(%s, '', true)", [USER_SETTING])


def tenant_by_slug(slug: str) -> Tenant | None:
    return Tenant.objects.filter(slug=slug).first()


def platform_read(
    *, actor: Actor, reason: str, read: Callable[[Tenant], T]
) -> Iterator[tuple[Tenant, T]]:
    """The one path that reads across tenants (platform operators).

    It never lifts row-level security: it enters each tenant's context in turn, runs ``read``
    there and appends a ``platform.read`` event to that tenant's audit chain, so every tenant
    can see who looked and why.
    """
    if not reason.strip():
        raise ValueError("a cross-tenant read needs a reason")
    for tenant in Tenant.objects.order_by("slug"):
        with transaction.atomic(), tenant_scope(tenant.pk):
            result = read(tenant)
            audit_record(
                tenant=tenant,
                actor=actor,
                action="platform.read",
                object_type="tenant",
                object_id=str(tenant.pk),
                data={"reason": reason[:500]},
            )
        yield tenant, result


def parse_uuid(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value))
    except (ValueError, TypeError, AttributeError):
        return None


# --- console reads ----------------------------------------------------------------------------
# Each one filters by tenant explicitly as well: row-level security is the guarantee, the filter
# keeps the query right even where a transaction can see more (see ``memberships_of``).


def tenant_permissions_of(user: Any, tenant: Tenant) -> frozenset[str]:
    """The tenant permissions ``user`` holds on ``tenant`` (codenames), in one lookup.

    Empty for anonymous or inactive people and for tenants they have nothing in; superusers
    hold every permission.
    """

    if not user.is_authenticated or not user.is_active:
        return frozenset()
    held = ObjectPermissionChecker(user).get_perms(tenant)
    return frozenset(held) & frozenset(ALL_PERMISSIONS)


def membership_list(*, tenant: Tenant) -> QuerySet[Membership]:
    """The tenant's memberships with their people, by username."""
    return (
        Membership.objects.filter(tenant=tenant).select_related("user").order_by("user__username")
    )


def membership_get(*, tenant: Tenant, membership_id: uuid.UUID) -> Membership | None:
    return Membership.objects.filter(tenant=tenant, pk=membership_id).select_related("user").first()


def membership_admin_count(*, tenant: Tenant) -> int:
    return Membership.objects.filter(tenant=tenant, role=Role.ADMIN).count()


def credential_list(*, tenant: Tenant) -> QuerySet[AgentCredential]:
    """The tenant's credentials, newest first, with who issued and revoked them."""
    return (
        AgentCredential.objects.filter(tenant=tenant)
        .select_related("created_by", "revoked_by")
        .order_by("-created_at")
    )


def credential_get(*, tenant: Tenant, credential_id: uuid.UUID) -> AgentCredential | None:
    return credential_list(tenant=tenant).filter(pk=credential_id).first()
