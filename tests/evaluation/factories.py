"""Hand-made scenarios for the evaluation's unit tests."""

from __future__ import annotations

from typing import Any

from apps.evaluation.metrics import Retrieved
from apps.evaluation.scenarios import DecisionSpec, MemorySpec, Scenario


def memory(
    mid: str, label: str, value: Any = "x", *, key: str = "k", at: str = "2025-01-01", **extra: Any
) -> MemorySpec:
    return MemorySpec(
        id=mid,
        key=key,
        value=value,
        content=f"{key} {value}",
        scope={"domain": "support"},
        sensitivity="internal",
        retention={"basis": "contract", "ttl": "P30D"},
        observed_at=at,
        trust=extra.pop("trust", "confirmed"),
        label=label,
        **extra,
    )


def scenario(
    memories: list[MemorySpec],
    *,
    expected: Any,
    default: Any = "default",
    cls: str = "c",
    irreversible: bool = True,
    sid: str = "s1",
) -> Scenario:
    return Scenario(
        id=sid,
        cls=cls,
        domain="support",
        subject=f"user:{sid}",
        memories=tuple(memories),
        decision=DecisionSpec(
            query="q",
            scope={"domain": "support"},
            key="k",
            irreversible=irreversible,
            default=default,
            expected=expected,
        ),
    )


def got(s: Scenario, *ids: str) -> tuple[Retrieved, ...]:
    """What a configuration returned, in rank order: the scenario's memories by id."""
    found = []
    for mid in ids:
        m = s.memory(mid)
        found.append(Retrieved(memory=m.id, key=m.key, value=m.value, observed_at=m.observed_at))
    return tuple(found)
