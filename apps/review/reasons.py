"""The tenant's review settings: canned reasons for approving and rejecting promotion
requests (picked in the queue by their number keys) and how long a reviewer's claim lasts.

A lead (``manage_review``) changes them, audited. Positions stay gapless under a lock on
the tenant row, so two leads editing at once never give two reasons one number key.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

from django.db import IntegrityError, transaction
from django.db.models import F

from apps.audit.services import audit_record
from apps.core.actors import Actor
from apps.core.errors import DomainError
from apps.review.models import REVIEW_REASONS_PER_DECISION, ReasonDecision, ReviewReason
from apps.tenancy.models import Tenant

# The shortest and longest claim a tenant may set: shorter expires mid-item, longer keeps a
# batch away from other reviewers for a whole shift.
CLAIM_DURATION_MIN = timedelta(minutes=1)
CLAIM_DURATION_MAX = timedelta(hours=8)


class ReasonError(DomainError):
    """A settings change refused; the message says why (``field`` names the form field)."""

    status = 400


def review_reasons() -> list[ReviewReason]:
    """The current tenant's canned reasons, by decision and position (key 1 first)."""
    return list(ReviewReason.objects.order_by("decision", "position"))


def review_reason_get(
    reason_id: uuid.UUID | str, decision: str | None = None
) -> ReviewReason | None:
    """One canned reason of the current tenant (another tenant's id finds nothing)."""
    queryset = ReviewReason.objects.filter(pk=reason_id)
    if decision is not None:
        queryset = queryset.filter(decision=decision)
    return queryset.first()


def _lock_tenant(tenant: Tenant, reason: ReviewReason | None = None) -> ReviewReason | None:
    """Lock the tenant row (positions change under it), then read ``reason`` again."""
    Tenant.objects.select_for_update().filter(pk=tenant.pk).first()
    return ReviewReason.objects.filter(pk=reason.pk).first() if reason is not None else None


def _audit(tenant: Tenant, actor: Actor, action: str, reason: ReviewReason) -> None:
    audit_record(
        tenant=tenant,
        actor=actor,
        action=action,
        object_type="review_reason",
        object_id=str(reason.pk),
        data={
            "decision": reason.decision,
            "text": reason.text,
            "position": reason.position,
            "target": {"review_reason": str(reason.pk)},
        },
        lane_key=f"review-settings:{tenant.pk}",
    )


@transaction.atomic
def review_reason_add(*, tenant: Tenant, decision: str, text: str, actor: Actor) -> ReviewReason:
    """Add a canned reason at the end of its decision's list (at most
    ``REVIEW_REASONS_PER_DECISION``: there are nine number keys)."""
    text = " ".join(text.split())
    if decision not in ReasonDecision.values:
        raise ReasonError("Choose approving or rejecting.", field="decision")
    if not text:
        raise ReasonError("Write the reason.", field="text")
    _lock_tenant(tenant)
    existing = ReviewReason.objects.filter(decision=decision)
    count = existing.count()
    if count >= REVIEW_REASONS_PER_DECISION:
        raise ReasonError(
            f"There are already {REVIEW_REASONS_PER_DECISION} canned reasons for "
            f"{ReasonDecision(decision).label.lower()} (one per number key): remove one first.",
            field="text",
        )
    if existing.filter(text=text).exists():
        raise ReasonError("That reason is already in the list.", field="text")
    try:
        with transaction.atomic():
            reason = ReviewReason.objects.create(
                tenant=tenant, decision=decision, text=text, position=count + 1
            )
    except IntegrityError as error:  # a twin added meanwhile (the unique constraint)
        raise ReasonError("That reason is already in the list.", field="text") from error
    _audit(tenant, actor, "review.reason_add", reason)
    return reason


@transaction.atomic
def review_reason_remove(*, tenant: Tenant, reason: ReviewReason, actor: Actor) -> None:
    """Remove a canned reason; the ones after it move up a key. Past decisions keep its text."""
    found = _lock_tenant(tenant, reason)
    if found is None:
        return
    found.delete()
    ReviewReason.objects.filter(decision=found.decision, position__gt=found.position).update(
        position=F("position") - 1
    )
    _audit(tenant, actor, "review.reason_remove", found)


@transaction.atomic
def review_reason_move_up(*, tenant: Tenant, reason: ReviewReason, actor: Actor) -> ReviewReason:
    """Swap a canned reason with the one before it (key 2 becomes key 1)."""
    found = _lock_tenant(tenant, reason)
    if found is None:
        raise ReasonError("That reason was removed meanwhile.")
    before = ReviewReason.objects.filter(
        decision=found.decision, position=found.position - 1
    ).first()
    if before is None:
        return found
    before.position, found.position = found.position, before.position
    ReviewReason.objects.bulk_update([before, found], ["position"])
    _audit(tenant, actor, "review.reason_move", found)
    return found


@transaction.atomic
def review_claim_duration_set(*, tenant: Tenant, duration: timedelta, actor: Actor) -> Tenant:
    """How long a claim on promotion requests lasts (claims already taken keep their end)."""
    if not CLAIM_DURATION_MIN <= duration <= CLAIM_DURATION_MAX:
        raise ReasonError("A claim lasts from 1 minute to 8 hours.", field="claim_minutes")
    locked = Tenant.objects.select_for_update().get(pk=tenant.pk)
    before = locked.review_claim_duration
    locked.review_claim_duration = duration
    locked.save(update_fields=["review_claim_duration"])
    audit_record(
        tenant=tenant,
        actor=actor,
        action="review.claim_duration",
        object_type="tenant",
        object_id=str(tenant.pk),
        data={
            "before_minutes": before.total_seconds() / 60,
            "after_minutes": duration.total_seconds() / 60,
            "target": {"tenant": str(tenant.pk)},
        },
        lane_key=f"review-settings:{tenant.pk}",
    )
    return locked
