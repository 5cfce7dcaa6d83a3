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
    """Recompute every link of the current tenant's chain; name the first broken one."""
    previous = GENESIS
    expected_seq = 1
    checked = 0
    for event in AuditEvent.objects.order_by("seq").iterator(chunk_size=2000):
        if event.seq != expected_seq:
            return ChainCheck(False, checked, expected_seq, f"event #{expected_seq} is missing")
        if event.prev_hash != previous:
            return ChainCheck(False, checked, event.seq, "previous-hash link does not match")
        if event_hash(event) != event.hash:
            return ChainCheck(False, checked, event.seq, "event content does not match its hash")
        previous = event.hash
        expected_seq += 1
        checked += 1
    return ChainCheck(True, checked)
