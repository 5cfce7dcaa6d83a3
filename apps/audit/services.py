"""Appending to the audit chain."""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from apps.tenancy.models import Tenant

from .models import ActorType, AuditChainHead, AuditEvent

GENESIS = "0" * 64


@dataclass(frozen=True)
class Actor:
    """Who caused a change: a person, an agent credential, or the system itself."""

    type: str
    id: str
    label: str

    @classmethod
    def system(cls, label: str = "system") -> Actor:
        return cls(type=ActorType.SYSTEM, id="", label=label)

    @classmethod
    def for_user(cls, user: Any) -> Actor:
        return cls(type=ActorType.USER, id=str(user.pk), label=user.get_username())

    @classmethod
    def for_credential(cls, credential: Any) -> Actor:
        return cls(type=ActorType.CREDENTIAL, id=str(credential.pk), label=credential.name)


def content_digest(payload: Any) -> str:
    """SHA-256 of a canonical JSON rendering: lets a receipt match content it does not keep."""
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def event_hash(event: AuditEvent) -> str:
    body = {
        "tenant": str(event.tenant_id),
        "seq": event.seq,
        "occurred_at": event.occurred_at.isoformat(),
        "actor": [event.actor_type, event.actor_id, event.actor_label],
        "action": event.action,
        "object": [event.object_type, event.object_id],
        "digest": event.digest,
        "data": event.data,
        "prev": event.prev_hash,
    }
    return content_digest(body)


@transaction.atomic
def audit_record(
    *,
    tenant: Tenant | uuid.UUID,
    actor: Actor,
    action: str,
    object_type: str = "",
    object_id: str = "",
    digest: str = "",
    data: dict[str, Any] | None = None,
) -> AuditEvent:
    """Append one event to ``tenant``'s chain, in the caller's transaction.

    The chain head row is locked until commit, so concurrent writers in one tenant append in
    a single order; other tenants are not blocked.
    """
    tenant_id = tenant.pk if isinstance(tenant, Tenant) else tenant
    head, _ = AuditChainHead.objects.select_for_update().get_or_create(
        tenant_id=tenant_id, defaults={"seq": 0, "hash": GENESIS}
    )
    event = AuditEvent(
        tenant_id=tenant_id,
        seq=head.seq + 1,
        occurred_at=timezone.now(),
        actor_type=actor.type,
        actor_id=actor.id,
        actor_label=actor.label[:200],
        action=action,
        object_type=object_type,
        object_id=str(object_id),
        digest=digest,
        data=data or {},
        prev_hash=head.hash,
    )
    event.hash = event_hash(event)
    event.save(force_insert=True)
    head.seq, head.hash = event.seq, event.hash
    head.save(update_fields=["seq", "hash"])
    return event
