"""Claims on promotion requests: a reviewer takes a batch of open requests for a while, so
two reviewers do not work the same items.

While a claim lasts, everyone sees who holds the request, and a decision on it by anyone
else is refused (:func:`claim_refusal`, called by ``promotion_approve`` and
``promotion_reject`` under the request's lock, so a decision and a claim never both win).
Claims end on their own: an expired claim is ignored by every read (``expires_at`` is
compared with the time of the read), so nothing has to sweep them. Taking and releasing
claims are audited; the expiry is not an event (nothing changes when it passes).

Only people hold claims: they are how reviewers in the console share out a queue. An agent
credential's decision through the API is refused like anyone else's while a person holds
the request.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from apps.audit.services import audit_record
from apps.core.actors import Actor, ActorType
from apps.core.errors import DomainError
from apps.records.models import PromotionRequest, PromotionState, ReviewClaim
from apps.tenancy.models import Tenant

# The most requests one claim takes: a batch is a page or two of work, not the queue.
CLAIM_BATCH_LIMIT = 50


class ClaimError(DomainError):
    """A claim that cannot be taken or released as asked (the message says why)."""


def claims_active(now: datetime | None = None) -> QuerySet[ReviewClaim]:
    """The claims in force at ``now`` (default: now)."""
    return ReviewClaim.objects.filter(expires_at__gt=now or timezone.now())


def held_by_others(holder_id: str, now: datetime) -> Q:
    """Promotion requests another person holds at ``now`` (for filtering the queue)."""
    return Q(
        Exists(claims_active(now).filter(request_id=OuterRef("pk")).exclude(holder_id=holder_id))
    )


def held_by(holder_id: str, now: datetime) -> Q:
    """Promotion requests ``holder_id`` holds at ``now``."""
    return Q(Exists(claims_active(now).filter(request_id=OuterRef("pk"), holder_id=holder_id)))


def claim_in_force(request: PromotionRequest, now: datetime) -> ReviewClaim | None:
    """The request's claim if one is in force at ``now``, from the row loaded with the request
    (``select_related("claim")``) when there is one, else from the database."""
    try:
        claim = request.claim
    except ReviewClaim.DoesNotExist:
        return None
    return claim if claim.expires_at > now else None


def claim_holder_is(claim: ReviewClaim, actor: Actor) -> bool:
    return actor.type == ActorType.USER and claim.holder_id == actor.id


def claim_end(*, request: PromotionRequest) -> None:
    """A decided request is no longer held (called under the request's lock by a decision)."""
    ReviewClaim.objects.filter(request_id=request.pk).delete()


@dataclass
class ClaimOutcome:
    """What a claim (or a release) did: the requests it took (or let go), those another person
    holds, and those no longer open (decided meanwhile, or gone)."""

    done: list[PromotionRequest] = field(default_factory=list)
    held: list[tuple[PromotionRequest, ReviewClaim]] = field(default_factory=list)
    closed: int = 0
    until: datetime | None = None


def _person(actor: Actor) -> None:
    if actor.type != ActorType.USER:
        raise ClaimError("Only a person claims promotion requests.")


def _locked(request_ids: Collection[uuid.UUID]) -> list[PromotionRequest]:
    # A fixed order: two reviewers claiming overlapping batches lock them in the same order.
    return list(
        PromotionRequest.objects.select_for_update(of=("self",))
        .select_related("record")
        .filter(pk__in=list(request_ids))
        .order_by("pk")
    )


@transaction.atomic
def claims_take(
    *,
    tenant: Tenant,
    request_ids: Sequence[uuid.UUID],
    actor: Actor,
    duration: timedelta | None = None,
) -> ClaimOutcome:
    """Claim the open requests ``request_ids`` for ``actor`` (a person) for ``duration``
    (default: the tenant's ``review_claim_duration``), renewing those they already hold.

    A request another person holds stays theirs (reported in ``held``); one no longer open is
    counted in ``closed``. One audit event names every request taken."""
    _person(actor)
    if len(request_ids) > CLAIM_BATCH_LIMIT:
        raise ClaimError(f"One claim takes at most {CLAIM_BATCH_LIMIT} requests.")
    now = timezone.now()
    until = now + (duration or tenant.review_claim_duration)
    outcome = ClaimOutcome(until=until)
    locked = _locked(request_ids)
    outcome.closed = len(set(request_ids)) - len(locked)
    claims = {claim.request_id: claim for claim in claims_active(now).filter(request__in=locked)}
    for request in locked:
        claim = claims.get(request.pk)
        if request.state != PromotionState.OPEN:
            outcome.closed += 1
        elif claim is not None and not claim_holder_is(claim, actor):
            outcome.held.append((request, claim))
        else:
            outcome.done.append(request)
    if not outcome.done:
        return outcome
    ReviewClaim.objects.bulk_create(
        [
            ReviewClaim(
                tenant_id=tenant.pk,
                request=request,
                holder_id=actor.id,
                holder_label=actor.label[:200],
                claimed_at=now,
                expires_at=until,
            )
            for request in outcome.done
        ],
        update_conflicts=True,
        unique_fields=["request"],
        update_fields=["holder_id", "holder_label", "claimed_at", "expires_at"],
    )
    ids = [str(request.pk) for request in outcome.done]
    audit_record(
        tenant=tenant,
        actor=actor,
        action="review.claim",
        object_type="promotion_request",
        object_id=ids[0],
        data={
            "reason": "claimed for review",
            "count": len(ids),
            "until": until.isoformat(),
            "target": {"promotion_requests": ids},
        },
        lane_key=f"review-claims:{actor.id}",
    )
    return outcome


@transaction.atomic
def claims_release(
    *, tenant: Tenant, actor: Actor, request_ids: Sequence[uuid.UUID] | None = None
) -> ClaimOutcome:
    """Let go of ``actor``'s claims on ``request_ids`` (all of theirs when None), so others
    may take those requests at once. Another person's claim is never released (reported in
    ``held``). One audit event names every request released."""
    _person(actor)
    now = timezone.now()
    outcome = ClaimOutcome()
    mine = claims_active(now).filter(holder_id=actor.id)
    if request_ids is not None:
        if len(request_ids) > CLAIM_BATCH_LIMIT:
            raise ClaimError(f"One release takes at most {CLAIM_BATCH_LIMIT} requests.")
        locked = _locked(request_ids)
        claims = {c.request_id: c for c in claims_active(now).filter(request__in=locked)}
        for request in locked:
            claim = claims.get(request.pk)
            if claim is None:
                continue
            if claim_holder_is(claim, actor):
                outcome.done.append(request)
            else:
                outcome.held.append((request, claim))
    else:
        outcome.done = [
            claim.request
            for claim in mine.select_for_update(of=("self",)).select_related("request")
        ]
    if not outcome.done:
        return outcome
    ids = [str(request.pk) for request in outcome.done]
    ReviewClaim.objects.filter(request_id__in=ids, holder_id=actor.id).delete()
    audit_record(
        tenant=tenant,
        actor=actor,
        action="review.release",
        object_type="promotion_request",
        object_id=ids[0],
        data={
            "reason": "released by its holder",
            "count": len(ids),
            "target": {"promotion_requests": ids},
        },
        lane_key=f"review-claims:{actor.id}",
    )
    return outcome


def claims_held_count(*, holder_id: str, now: datetime | None = None) -> int:
    """How many open requests ``holder_id`` holds."""
    return (
        claims_active(now).filter(holder_id=holder_id, request__state=PromotionState.OPEN).count()
    )
