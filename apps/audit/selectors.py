"""Reading the audit log (filtered, keyset-paged) and checking its chain."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Q

from apps.tenancy.models import Tenant

from .models import AuditChainHead, AuditEvent
from .services import GENESIS, event_hash


@dataclass(frozen=True)
class ChainCheck:
    ok: bool
    checked: int
    broken_seq: int | None = None
    problem: str = ""


def audit_chain_verify() -> ChainCheck:
    """Recompute every link of the current tenant's chain; name the first broken one.

    Each event must link to the previous event of its lane and hash to its stored hash; each
    lane's head must point at the lane's event number ``count``, so removing events at the end
    of a lane is caught as well as rewriting or removing one in the middle. Heads are read
    first: events appended meanwhile only extend lanes past their heads, which is fine.
    """

    heads = {head.lane: head for head in AuditChainHead.objects.all()}
    last: dict[int, str] = {}
    counts: dict[int, int] = {}
    at_head: dict[int, str] = {lane: GENESIS for lane, h in heads.items() if h.count == 0}
    checked = 0
    for event in AuditEvent.objects.order_by("seq").iterator(chunk_size=2000):
        if event.prev_hash != last.get(event.lane, GENESIS):
            return ChainCheck(False, checked, event.seq, "previous-hash link does not match")
        if event_hash(event) != event.hash:
            return ChainCheck(False, checked, event.seq, "event content does not match its hash")
        last[event.lane] = event.hash
        counts[event.lane] = counts.get(event.lane, 0) + 1
        head = heads.get(event.lane)
        if head is not None and counts[event.lane] == head.count:
            at_head[event.lane] = event.hash
        checked += 1
    for lane, head in sorted(heads.items()):
        if at_head.get(lane) != head.hash:
            return ChainCheck(
                False,
                checked,
                None,
                f"lane {lane} should hold {head.count} events ending in its head's hash; "
                f"{counts.get(lane, 0)} found (events removed or rewritten at its end)",
            )
    return ChainCheck(True, checked)


@dataclass(frozen=True)
class AuditEventPage:
    """One page of the audit log, newest first, with keyset cursors to its neighbours."""

    events: list[AuditEvent]
    newer_than: int | None  # pass as ``after`` for the next newer page, if there is one
    older_than: int | None  # pass as ``before`` for the next older page, if there is one


def audit_event_page(
    *,
    tenant: Tenant,
    actor: str = "",
    action: str = "",
    object_id: str = "",
    since: datetime | None = None,
    before: int | None = None,
    after: int | None = None,
    size: int = 50,
) -> AuditEventPage:
    """Filtered audit events, paged by sequence number (keyset: no OFFSET, no COUNT).

    ``actor`` matches the actor's id or label; ``action`` is a prefix (``credential`` matches
    ``credential.issue`` and ``credential.revoke``); ``object_id`` is exact; ``since`` bounds
    the time. ``before`` pages towards older events, ``after`` towards newer ones.
    """
    events = AuditEvent.objects.filter(tenant=tenant)
    if actor:
        events = events.filter(Q(actor_id=actor) | Q(actor_label=actor))
    if action:
        events = events.filter(action__startswith=action)
    if object_id:
        events = events.filter(object_id=object_id)
    if since is not None:
        events = events.filter(occurred_at__gte=since)
    if after is not None:
        # Walk forwards from the cursor, then show the slice newest first like every page.
        rows = list(events.filter(seq__gt=after).order_by("seq")[: size + 1])
        has_newer = len(rows) > size
        rows = rows[:size][::-1]
        has_older = True
    else:
        if before is not None:
            events = events.filter(seq__lt=before)
        rows = list(events.order_by("-seq")[: size + 1])
        has_older = len(rows) > size
        rows = rows[:size]
        has_newer = before is not None
    if not rows:
        return AuditEventPage(events=[], newer_than=None, older_than=None)
    return AuditEventPage(
        events=rows,
        newer_than=rows[0].seq if has_newer else None,
        older_than=rows[-1].seq if has_older else None,
    )


def audit_event_recent(*, tenant: Tenant, limit: int = 10) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(tenant=tenant).order_by("-seq")[:limit])
