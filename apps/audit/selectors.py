"""Reading and checking the audit chain."""

from __future__ import annotations

from dataclasses import dataclass

from .models import AuditEvent
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
    from .models import AuditChainHead

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
