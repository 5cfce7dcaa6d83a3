"""Retention: how long a record may live, and the read-time expiry predicate."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Case, DateTimeField, Exists, F, Q, Value, When
from django.utils import timezone

from .models import (
    DEFAULT_RETENTION,
    MemoryRecord,
    MemoryRecordQuerySet,
    RetentionRule,
    Trust,
    record_expired_q,
    record_held,
    record_live_q,
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


def lifetime(
    *,
    sensitivity: str,
    trust: str,
    ttl: timedelta | None,
    written_at: datetime,
    limits: Limits | None = None,
) -> Lifetime:
    """``written_at + min(ttl, class rule)``; says whether the requested ttl was clipped.

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
    return Lifetime(
        expires_at=written_at + effective if effective is not None else None,
        limit=limit,
        clipped=clipped,
    )


def active_hold_for_record() -> Exists:
    """An active legal hold on the outer record's subject or fact."""
    return record_held()


def expired_q(now: datetime | None = None) -> Q:
    """Past its lifetime, expired by status, or written under a revoked consent
    (:func:`~apps.records.models.record_expired_q`)."""
    return record_expired_q(now or timezone.now())


def live_q(now: datetime | None = None) -> Q:
    """Not expired, unless a legal hold keeps it (:func:`~apps.records.models.record_live_q`,
    as ``MemoryRecord.objects.live`` applies it)."""
    return record_live_q(now or timezone.now())


def records_shortened_by(
    *,
    sensitivity: str,
    provisional_max: timedelta,
    confirmed_max: timedelta | None,
    now: datetime,
) -> MemoryRecordQuerySet:
    """The class's live versions whose lifetime the rule ``(provisional_max, confirmed_max)``
    brings forward, annotated with ``shortened_expires_at``: ``written_at`` plus the limit of
    their trust, as :func:`lifetime` computes it for a write. Only an earlier expiry counts,
    so a rule never lengthens a version past what its writer asked (or what it had)."""
    limits = {Trust.PROVISIONAL: provisional_max, Trust.CONFIRMED: confirmed_max}
    new_expiry = Case(
        *(
            When(trust=trust, then=F("written_at") + Value(limit))
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
