"""Appending to the audit chain."""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from apps.tenancy.models import Tenant

from .models import ActorType, AuditChainHead, AuditEvent

GENESIS = "0" * 64
# Strands of each tenant's chain (see AuditEvent). Stored per event and per head, so the
# number can change later without breaking existing chains.
LANES = 8


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


def body_digest(event: AuditEvent) -> str:
    """Digest of everything an event says except its place in the chain."""
    return content_digest(
        {
            "tenant": str(event.tenant_id),
            "lane": event.lane,
            "occurred_at": event.occurred_at.isoformat(),
            "actor": [event.actor_type, event.actor_id, event.actor_label],
            "action": event.action,
            "object": [event.object_type, event.object_id],
            "digest": event.digest,
            "data": event.data,
        }
    )


def link_hash(prev_hash: str, seq: int, body: str) -> str:
    """``sha256(prev_hash ":" seq ":" body_digest)``, the same formula the database uses."""
    return hashlib.sha256(f"{prev_hash}:{seq}:{body}".encode()).hexdigest()


def event_hash(event: AuditEvent) -> str:
    return link_hash(event.prev_hash, event.seq, body_digest(event))


# One statement: lock the lane's head, advance it and insert the event linked to the lane's
# previous event. The head lock is held until the surrounding transaction commits, so it is
# taken in a single round trip, as late as the caller's code allows.
APPEND_SQL = """
WITH prev AS (
    SELECT count, hash FROM audit_auditchainhead
     WHERE tenant_id = %(tenant)s AND lane = %(lane)s FOR UPDATE
), next AS (
    SELECT nextval('audit_event_seq') AS seq
), head AS (
    UPDATE audit_auditchainhead h
       SET count = prev.count + 1,
           hash = encode(sha256(convert_to(
               prev.hash || ':' || next.seq::text || ':' || %(body)s, 'UTF8')), 'hex')
      FROM prev, next
     WHERE h.tenant_id = %(tenant)s AND h.lane = %(lane)s
 RETURNING next.seq, h.hash, prev.hash AS prev_hash
)
INSERT INTO audit_auditevent (id, tenant_id, seq, lane, occurred_at, actor_type, actor_id,
    actor_label, action, object_type, object_id, digest, data, prev_hash, hash)
SELECT %(id)s, %(tenant)s, head.seq, %(lane)s, %(occurred_at)s, %(actor_type)s, %(actor_id)s,
    %(actor_label)s, %(action)s, %(object_type)s, %(object_id)s, %(digest)s, %(data)s,
    head.prev_hash, head.hash
  FROM head
RETURNING seq, prev_hash, hash
"""


def lane_for(object_id: str) -> int:
    """Events about one object share a lane (they are serialised by that object's lock
    anyway); different objects spread over the lanes."""
    material = object_id or uuid.uuid4().hex
    return hashlib.sha256(material.encode()).digest()[0] % LANES


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

    The chain head row stays locked until commit, so concurrent writers in one tenant append
    in a single order; other tenants are not blocked.
    """
    tenant_id = tenant.pk if isinstance(tenant, Tenant) else tenant
    event = AuditEvent(
        id=uuid.uuid4(),
        tenant_id=tenant_id,
        lane=lane_for(str(object_id)),
        occurred_at=timezone.now(),
        actor_type=actor.type,
        actor_id=actor.id,
        actor_label=actor.label[:200],
        action=action,
        object_type=object_type,
        object_id=str(object_id),
        digest=digest,
        data=json.loads(json.dumps(data or {}, default=str)),
    )
    params: dict[str, Any] = {
        "tenant": tenant_id,
        "lane": event.lane,
        "body": body_digest(event),
        "id": event.id,
        "occurred_at": event.occurred_at,
        "actor_type": event.actor_type,
        "actor_id": event.actor_id,
        "actor_label": event.actor_label,
        "action": event.action,
        "object_type": event.object_type,
        "object_id": event.object_id,
        "digest": event.digest,
        "data": json.dumps(event.data),
    }
    with transaction.atomic(savepoint=False), connection.cursor() as cursor:
        cursor.execute(APPEND_SQL, params)
        row = cursor.fetchone()
        if row is None:
            # The lane's first event: open it, then append.
            AuditChainHead.objects.bulk_create(
                [AuditChainHead(tenant_id=tenant_id, lane=event.lane, count=0, hash=GENESIS)],
                ignore_conflicts=True,
            )
            cursor.execute(APPEND_SQL, params)
            row = cursor.fetchone()
    assert row is not None
    event.seq, event.prev_hash, event.hash = row
    event._state.adding = False
    return event
