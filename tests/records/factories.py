"""Valid memory-write bodies, to vary one field at a time."""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

import factory
from django.utils import timezone


def observed_now() -> str:
    """Now, to the second, as a write's ``observed_at``: a record's lifetime counts from its
    observation, so a fixed date would soon be one that has already expired."""
    return timezone.now().isoformat(timespec="seconds").replace("+00:00", "Z")


def observed_just_ahead() -> str:
    """A whole second twenty seconds ahead, as ``observed_at``: the API accepts an
    observation up to 30 seconds ahead (clock skew) and counts its ttl from it, so a
    sub-second ttl cannot run out before a write on a loaded machine arrives."""
    ahead = timezone.now().replace(microsecond=0) + timedelta(seconds=20)
    return ahead.isoformat(timespec="seconds").replace("+00:00", "Z")


BASE: dict[str, Any] = {
    "key": "shipping.preference",
    "subject": "user:8812",
    "value": "carrier_a",
    "source": {"kind": "interaction", "ref": "interaction:4821", "turn_id": "t-1"},
    "observed_at": observed_now(),
    "owner": "user:alice",
    "reason": "applied in checkout flow",
    "scope": {"domain": "commerce", "task_type": "checkout", "conditions": {"region": "eu"}},
    "sensitivity": "personal",
    "retention": {"basis": "contract", "ttl": "P30D"},
}


class WriteBodyFactory(factory.DictFactory):
    """A complete, valid write body; override any top-level field."""

    key = "shipping.preference"
    subject = factory.Sequence(lambda n: f"user:{8800 + n}")
    value = "carrier_a"
    source = factory.Sequence(lambda n: {"kind": "interaction", "ref": f"interaction:{n}"})
    observed_at = factory.LazyFunction(observed_now)
    owner = "user:alice"
    reason = "applied in checkout flow"
    scope = factory.LazyFunction(
        lambda: {"domain": "commerce", "task_type": "checkout", "conditions": {"region": "eu"}}
    )
    sensitivity = "personal"
    retention = factory.LazyFunction(lambda: {"basis": "contract", "ttl": "P30D"})


def body(**overrides: Any) -> dict[str, Any]:
    """BASE (observed now) with overrides; ``None`` removes a field; dotted names reach into
    objects."""
    data = copy.deepcopy(BASE)
    data["observed_at"] = observed_now()
    for name, value in overrides.items():
        target = data
        parts = name.split("__")
        for part in parts[:-1]:
            target = target.setdefault(part, {})
        if value is None:
            target.pop(parts[-1], None)
        else:
            target[parts[-1]] = value
    return data
