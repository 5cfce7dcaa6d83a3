"""Appending to the audit chain."""

from __future__ import annotations

import hashlib
import json
import threading
import uuid
import weakref
from collections.abc import Sequence
from functools import partial
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

# Actor is imported from here by the deletion and erasure modules until they move to
# apps.governance; its home is apps.core.actors.
from apps.core.actors import Actor as Actor
from apps.tenancy.context import prepared_cursor
from apps.tenancy.models import AuditReads, Tenant

from .models import AuditChainHead, AuditEvent, ErasureLedgerEntry

GENESIS = "0" * 64
# Strands of each tenant's chain (see AuditEvent). Stored per event and per head, so the
# number can change later without breaking existing chains. A lane's head stays locked from
# an append until its commit (WAL flush included), so concurrent writers of one tenant
# collide on a head less often the more lanes there are (docs/performance.md).
LANES = 32


def content_digest(payload: Any) -> str:
    """SHA-256 of a canonical JSON rendering: lets a receipt match content it does not keep."""
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def subject_digest(subject: str) -> str:
    """The digest receipts keep of a subject (an erasure by subject keeps the same one)."""
    return content_digest({"subject": subject})


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
# taken in a single round trip, as late as the caller's code allows. Written as the tail of a
# statement, so a caller's own changes can go first in the same round trip (``alongside``),
# and guarded by a condition on them (``when``). The last SELECT always returns one row: the
# condition, and the new link (missing when the condition failed or the lane has no head).
APPEND_TAIL = """
prev AS (
    SELECT count, hash FROM audit_auditchainhead
     WHERE tenant_id = %s AND lane = %s AND (CONDITION) FOR UPDATE
), next AS (
    SELECT nextval('audit_event_seq') AS seq
), head AS (
    UPDATE audit_auditchainhead h
       SET count = prev.count + 1,
           hash = encode(sha256(convert_to(
               prev.hash || ':' || next.seq::text || ':' || %s, 'UTF8')), 'hex')
      FROM prev, next
     WHERE h.tenant_id = %s AND h.lane = %s
 RETURNING next.seq, h.hash, prev.hash AS prev_hash
), appended AS (
    INSERT INTO audit_auditevent (id, tenant_id, seq, lane, occurred_at, actor_type,
        actor_id, actor_label, action, object_type, object_id, digest, data, prev_hash, hash)
    SELECT %s, %s, head.seq, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, head.prev_hash, head.hash
      FROM head
    RETURNING seq, prev_hash, hash
)
SELECT (CONDITION), appended.seq, appended.prev_hash, appended.hash
  FROM (VALUES (1)) AS one LEFT JOIN appended ON true
"""


def lane_for(key: str) -> int:
    """Events with one lane key share a lane (they are serialised by that object's lock
    anyway); different keys spread over the lanes."""
    material = key or uuid.uuid4().hex
    return hashlib.sha256(material.encode()).digest()[0] % LANES


class _TransactionMark:
    """Registered with ``on_commit`` by the first append of a transaction. Django holds it
    until that transaction commits (and calls it) or rolls back (and drops it, with the
    append): a weak reference to it is alive exactly while the append can still commit."""

    __slots__ = ("__weakref__", "lane")

    def __init__(self, lane: int) -> None:
        self.lane = lane

    def __call__(self) -> None:
        """Called after the commit: the mark's work was being held until then."""


_first_append = threading.local()


def _transaction_lane(proposed: int) -> int:
    """The lane every event of the transaction in progress goes to: the lane of its first
    event (``proposed`` when this is the first). Two transactions appending to two lanes in
    opposite orders would deadlock on the heads; one lane per transaction cannot."""
    if not connection.in_atomic_block:
        return proposed  # the append is a transaction of its own
    held = getattr(_first_append, "mark", None)
    mark = held() if held is not None else None
    if mark is None:
        mark = _TransactionMark(proposed)
        transaction.on_commit(mark)
        _first_append.mark = weakref.ref(mark)
    return mark.lane


def audit_event(
    *,
    tenant: Tenant | uuid.UUID,
    actor: Actor,
    action: str,
    object_type: str = "",
    object_id: str = "",
    digest: str = "",
    data: dict[str, Any] | None = None,
    lane_key: str = "",
) -> AuditEvent:
    """An event not yet in the chain; :func:`audit_append` links and stores it.

    The lane follows ``lane_key`` (default: the object id), spreading a tenant's concurrent
    writers over the lanes; :func:`audit_append` then puts every event of one transaction on
    the lane of its first, so a change emitting several events, about several objects, never
    holds two lanes' heads.
    """
    tenant_id = tenant.pk if isinstance(tenant, Tenant) else tenant
    return AuditEvent(
        id=uuid.uuid4(),
        tenant_id=tenant_id,
        lane=lane_for(lane_key or str(object_id)),
        occurred_at=timezone.now(),
        **actor.fields("actor"),
        action=action,
        object_type=object_type,
        object_id=str(object_id),
        digest=digest,
        data=json.loads(json.dumps(data or {}, default=str)),
    )


def _append_params(event: AuditEvent) -> list[Any]:
    tenant, lane = event.tenant_id, event.lane
    return [
        *(tenant, lane),
        *(body_digest(event), tenant, lane),
        *(event.id, tenant, lane, event.occurred_at, event.actor_type, event.actor_id),
        *(event.actor_label, event.action, event.object_type, event.object_id, event.digest),
        json.dumps(event.data),
    ]


def audit_append(
    event: AuditEvent,
    *,
    alongside: Sequence[tuple[str, Sequence[Any]]] = (),
    when: str = "TRUE",
    prepared: bool = False,
) -> AuditEvent | None:
    """Append ``event`` to its tenant's chain, in the caller's transaction, in one statement
    together with the ``alongside`` statements (INSERT, UPDATE or DELETE, as ``(sql,
    params)`` with ``%s`` placeholders; the n-th is the clause ``change_n``): the change and
    its audit event reach the database in one round trip, and succeed or fail together.

    ``when`` is a condition on those clauses (a constant SQL expression, no parameters, e.g.
    ``EXISTS (SELECT 1 FROM change_1)`` for an UPDATE with RETURNING that must have matched):
    when it is false, nothing is appended and None is returned.

    The lane's head row stays locked until commit, so concurrent appends to one lane happen
    in a single order; other lanes and other tenants are not blocked. ``prepared``: the
    statement is prepared on the server (the write path's, a fixed text;
    :func:`apps.tenancy.context.prepared_cursor`). Returns the event as
    stored (``event`` itself gets its place in the chain too, but stays an unsaved
    instance).
    """
    event.lane = _transaction_lane(event.lane)
    clauses = [f"change_{n} AS ({sql})" for n, (sql, _) in enumerate(alongside, 1)]
    params = [p for _, change_params in alongside for p in change_params]
    statement = "WITH " + ",\n".join([*clauses, APPEND_TAIL.replace("CONDITION", when)])
    cursor_for = partial(prepared_cursor, generic_plan=False) if prepared else connection.cursor
    with transaction.atomic(savepoint=False), cursor_for() as cursor:
        cursor.execute(statement, [*params, *_append_params(event)])
        wanted, *link = cursor.fetchone() or (False,)
        if not wanted:
            return None
        if link[0] is None:
            # The lane's first event (the changes alongside are done): open it, then append.
            AuditChainHead.objects.bulk_create(
                [AuditChainHead(tenant_id=event.tenant_id, lane=event.lane, hash=GENESIS)],
                ignore_conflicts=True,
            )
            cursor.execute(
                "WITH " + APPEND_TAIL.replace("CONDITION", "TRUE"), _append_params(event)
            )
            _, *link = cursor.fetchone()
    event.seq, event.prev_hash, event.hash = link
    fields = AuditEvent._meta.concrete_fields
    return AuditEvent.from_db(
        connection.alias,
        [f.attname for f in fields],
        [getattr(event, f.attname) for f in fields],
    )


def audit_record(
    *,
    tenant: Tenant | uuid.UUID,
    actor: Actor,
    action: str,
    object_type: str = "",
    object_id: str = "",
    digest: str = "",
    data: dict[str, Any] | None = None,
    lane_key: str = "",
) -> AuditEvent:
    """Append one event to ``tenant``'s chain, in the caller's transaction (see
    :func:`audit_event` for ``lane_key`` and :func:`audit_append`)."""
    appended = audit_append(
        audit_event(
            tenant=tenant,
            actor=actor,
            action=action,
            object_type=object_type,
            object_id=object_id,
            digest=digest,
            data=data,
            lane_key=lane_key,
        )
    )
    assert appended is not None  # unconditional
    return appended


def read_audited(tenant: Tenant, *, restricted: bool) -> bool:
    """Whether the tenant's ``audit_reads`` policy asks for a read to be audited;
    ``restricted``: the read returned at least one memory of the restricted class."""
    policy = tenant.audit_reads
    return policy == AuditReads.ALL or (policy == AuditReads.RESTRICTED and restricted)


def audit_read(
    *, tenant: Tenant, actor: Actor, action: str, data: dict[str, Any], restricted: bool
) -> AuditEvent | None:
    """Record a read of memory (a fact read, a fact check, a context search) where the
    tenant's ``audit_reads`` policy asks for it: who read, with which filters, and the ids of
    what was returned; never content (the caller passes ids and filters only). Returns the
    event, or None when the policy leaves this read out."""
    if not read_audited(tenant, restricted=restricted):
        return None
    return audit_record(tenant=tenant, actor=actor, action=action, data=data)


def erasure_ledger_append(
    *,
    tenant_id: uuid.UUID | str,
    kind: str,
    target: dict[str, Sequence[Any]],
    reason: str,
    reference: str = "",
) -> None:
    """Record a removal in the erasure ledger (:class:`ErasureLedgerEntry`), in the caller's
    transaction: what a restore re-applies to an older backup. ``target`` names ids only."""
    erasure_ledger_entry(
        tenant_id=tenant_id, kind=kind, target=target, reason=reason, reference=reference
    ).save(force_insert=True)


def erasure_ledger_entry(
    *,
    tenant_id: uuid.UUID | str,
    kind: str,
    target: dict[str, Sequence[Any]],
    reason: str,
    reference: str = "",
) -> ErasureLedgerEntry:
    """The entry :func:`erasure_ledger_append` stores, unsaved (for a caller that inserts it
    with other rows in one statement: a record's deletion)."""
    return ErasureLedgerEntry(
        tenant_id=tenant_id,
        recorded_at=timezone.now(),
        kind=kind,
        target={name: [str(item) for item in items] for name, items in target.items()},
        reason=reason,
        reference=reference[:64],
    )
