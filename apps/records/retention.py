"""Retention: how long a record may live (the read-time expiry predicate is
``MemoryRecordQuerySet.expired``).

A record's lifetime counts from when it was observed (``observed_at``), not from when it was
written: an observation made in January with a 30-day ttl ends in February, however late it
reaches the memory. ``observed_at`` may run ahead of the server's clock by the allowed skew;
the lifetime then counts from the write, so a clock ahead never lengthens it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Case, DateTimeField, F, Q, Value, When
from django.db.models.functions import Least

from .models import (
    DEFAULT_RETENTION,
    MemoryRecord,
    MemoryRecordQuerySet,
    RetentionRule,
    Trust,
)


@dataclass(frozen=True)
class Lifetime:
    expires_at: datetime | None
    limit: timedelta | None
    clipped: bool


def class_limits(sensitivity: str) -> tuple[timedelta, timedelta | None]:
    """The current tenant's (provisional_max, confirmed_max) for a sensitivity class."""
    rule = RetentionRule.objects.filter(sensitivity=sensitivity).first()
    if rule is not None:
        return rule.provisional_max, rule.confirmed_max
    return DEFAULT_RETENTION[sensitivity]


Limits = tuple[timedelta, timedelta | None]


def lifetime_start(*, observed_at: datetime, written_at: datetime) -> datetime:
    """When a record's lifetime starts: its observation, never later than its write."""
    return min(observed_at, written_at)


def lifetime_start_expression() -> Least:
    """:func:`lifetime_start` of each row, in a query."""
    return Least(F("observed_at"), F("written_at"), output_field=DateTimeField())


def lifetime(
    *,
    sensitivity: str,
    trust: str,
    ttl: timedelta | None,
    observed_at: datetime,
    written_at: datetime,
    limits: Limits | None = None,
) -> Lifetime:
    """``lifetime_start + min(ttl, class rule)``; says whether the requested ttl was clipped.

    ``limits`` are the class's ``(provisional_max, confirmed_max)`` when the caller has read
    them already (the write path reads them in the statement that locks the fact)."""
    provisional_max, confirmed_max = limits or class_limits(sensitivity)
    limit = provisional_max if trust == Trust.PROVISIONAL else confirmed_max
    if ttl is None:
        effective = limit
    elif limit is None:
        effective = ttl
    else:
        effective = min(ttl, limit)
    clipped = ttl is not None and limit is not None and ttl > limit
    start = lifetime_start(observed_at=observed_at, written_at=written_at)
    return Lifetime(
        expires_at=start + effective if effective is not None else None,
        limit=limit,
        clipped=clipped,
    )


# An observation older than this has its class's rule read before the write (one query); a
# fresher one cannot have outlived any rule, as no rule is shorter than this
# (apps.governance.services.retention_rule_set refuses one), so the write path reads the rule
# in the statement that locks the fact, as before.
FRESH_OBSERVATION = timedelta(minutes=1)


def lifetime_ended(
    *,
    sensitivity: str,
    ttl: timedelta | None,
    observed_at: datetime,
    now: datetime,
) -> dict[str, list[str]] | None:
    """Why a provisional record observed at ``observed_at`` would have expired before being
    written ``now``, by field path (``None`` when it would not): ``observed_at`` and the
    limit that ended it, ``retention.ttl`` or the class's rule (``sensitivity``)."""
    start = lifetime_start(observed_at=observed_at, written_at=now)
    age = now - start
    if ttl is not None and ttl <= age:
        ended = _timestamp(start + ttl)
        return {
            "observed_at": [OUTLIVED],
            "retention.ttl": [
                f"Counted from observed_at, this ttl ended at {ended}: the observation has "
                f"already expired. Send a longer ttl if it is still meant to be kept."
            ],
        }
    if age < FRESH_OBSERVATION:
        return None
    provisional_max, _confirmed_max = class_limits(sensitivity)
    if provisional_max <= age:
        ended = _timestamp(start + provisional_max)
        return {
            "observed_at": [OUTLIVED],
            "sensitivity": [
                f"The {sensitivity} class keeps a provisional record at most "
                f"{_duration(provisional_max)} from its observation: this one ended at {ended}."
            ],
        }
    return None


OUTLIVED = (
    "Older than its retention allows: a record's lifetime counts from observed_at, and this "
    "one has already ended. Nothing was stored."
)


def _timestamp(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def _duration(value: timedelta) -> str:
    if value % timedelta(days=1):
        return f"{value.total_seconds():g} seconds"
    return f"{value.days} days"


def records_shortened_by(
    *,
    sensitivity: str,
    provisional_max: timedelta,
    confirmed_max: timedelta | None,
    now: datetime,
) -> MemoryRecordQuerySet:
    """The class's live versions whose lifetime the rule ``(provisional_max, confirmed_max)``
    brings forward, annotated with ``shortened_expires_at``: their lifetime's start plus the
    limit of their trust, as :func:`lifetime` computes it for a write. Only an earlier expiry
    counts, so a rule never lengthens a version past what its writer asked (or what it had)."""
    limits = {Trust.PROVISIONAL: provisional_max, Trust.CONFIRMED: confirmed_max}
    new_expiry = Case(
        *(
            When(trust=trust, then=lifetime_start_expression() + Value(limit))
            for trust, limit in limits.items()
            if limit is not None
        ),
        default=None,
        output_field=DateTimeField(),
    )
    return (
        MemoryRecord.objects.live(now)
        .filter(sensitivity=sensitivity)
        .annotate(shortened_expires_at=new_expiry)
        .filter(shortened_expires_at__isnull=False)
        .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=F("shortened_expires_at")))
    )
