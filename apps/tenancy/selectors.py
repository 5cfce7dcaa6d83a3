"""Reads of tenants, memberships and credentials."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any, TypeVar

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from apps.audit.services import Actor, audit_record

from .context import expose_credential_lookup, expose_memberships_of, tenant_scope
from .models import AgentCredential, Membership, Tenant

T = TypeVar("T")

# last_used_at is written at most this often per credential, to keep reads read-only.
LAST_USED_RESOLUTION = timedelta(minutes=1)


def credential_for_token(token: str) -> AgentCredential | None:
    """The active credential ``token`` belongs to, or None. Must run inside a transaction."""
    from .services import TOKEN_PREFIX, hash_token

    if not token.startswith(TOKEN_PREFIX) or len(token) > 200:
        return None
    digest = hash_token(token)
    expose_credential_lookup(digest)
    credential = AgentCredential.objects.select_related("tenant").filter(token_hash=digest).first()
    if credential is None or credential.revoked_at is not None:
        return None
    return credential


def credential_touch(credential: AgentCredential) -> None:
    """Record use, at most once a minute (under the credential's tenant context)."""
    now = timezone.now()
    if credential.last_used_at is None or now - credential.last_used_at > LAST_USED_RESOLUTION:
        AgentCredential.objects.filter(pk=credential.pk).update(last_used_at=now)
        credential.last_used_at = now


def memberships_of(user: Any) -> list[Membership]:
    """Every tenant ``user`` belongs to, across tenants (for the tenant switcher)."""
    if not user.is_authenticated:
        return []
    expose_memberships_of(user.pk)
    return list(
        Membership.objects.filter(user=user).select_related("tenant").order_by("tenant__slug")
    )


def tenant_by_slug(slug: str) -> Tenant | None:
    return Tenant.objects.filter(slug=slug).first()


def credentials_list() -> QuerySet[AgentCredential]:
    """The current tenant's credentials, newest first."""
    return AgentCredential.objects.select_related("created_by").order_by("-created_at")


def memberships_list() -> QuerySet[Membership]:
    return Membership.objects.select_related("user").order_by("user__username")


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
