"""Claims on review items (promotion requests and open conflicts): a reviewer takes a batch
of open items for a while, so two reviewers do not work the same items.

While a claim lasts, everyone sees who holds the item, and a decision on it by anyone else
(an agent credential's through the API too) is refused by :func:`claim_refusal`, called by
the decisions under the item's lock, so a decision and a claim never both win. An expired
claim is ignored by every read, so nothing sweeps them. Taking and releasing are audited.
Only people hold claims. ``kind`` (:data:`PROMOTIONS` or :data:`CONFLICTS`) picks the queue:
one table, one set of rules, for both.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from apps.audit.services import audit_record
from apps.core.actors import Actor, ActorType
from apps.core.errors import DomainError
from apps.records.models import (
    Conflict,
    ConflictState,
    Fact,
    PromotionRequest,
    PromotionState,
)
from apps.review.models import ReviewClaim
from apps.tenancy.models import Tenant

# The most items one claim takes: a batch is a page or two of work, not the queue.
CLAIM_BATCH_LIMIT = 50

Claimable = PromotionRequest | Conflict


class ClaimError(DomainError):
    """A claim that cannot be taken or released as asked (the message says why)."""


@dataclass(frozen=True)
class ClaimKind:
    """What a claim holds: the claim's column naming it, the open state, what it loads with
    the item (to name it), and its name in audit events and messages."""

    model: type[PromotionRequest] | type[Conflict]
    column: str  # the ReviewClaim field naming the item
    open_state: str
    related: str  # loaded with the item: what names it (the record, the fact)
    object_type: str  # in audit events
    target: str  # the audit event's list of ids
    noun: str  # in messages

    def of(self, ids: Collection[uuid.UUID] | uuid.UUID) -> Q:
        """Claims naming the item ``ids`` (one id or several)."""
        if isinstance(ids, uuid.UUID):
            return Q(**{f"{self.column}_id": ids})
        return Q(**{f"{self.column}_id__in": list(ids)})

    def item_of(self, claim: ReviewClaim) -> uuid.UUID | None:
        return claim.conflict_id if self.model is Conflict else claim.request_id


PROMOTIONS = ClaimKind(
    model=PromotionRequest,
    column="request",
    open_state=PromotionState.OPEN,
    related="record",
    object_type="promotion_request",
    target="promotion_requests",
    noun="request",
)
CONFLICTS = ClaimKind(
    model=Conflict,
    column="conflict",
    open_state=ConflictState.OPEN,
    related="fact",
    object_type="conflict",
    target="conflicts",
    noun="conflict",
)


def claim_kind(claim: ReviewClaim) -> ClaimKind:
    return CONFLICTS if claim.conflict_id is not None else PROMOTIONS


def _kind_of(item: Claimable) -> ClaimKind:
    return CONFLICTS if isinstance(item, Conflict) else PROMOTIONS


def item_label(item: Claimable) -> str:
    """How messages name an item: its subject and key."""
    named = item.fact if isinstance(item, Conflict) else item.record
    return f"{named.subject} · {named.key}"


def claims_active(now: datetime | None = None) -> QuerySet[ReviewClaim]:
    """The claims in force at ``now`` (default: now)."""
    return ReviewClaim.objects.filter(expires_at__gt=now or timezone.now())


def _held(kind: ClaimKind, now: datetime) -> QuerySet[ReviewClaim]:
    return claims_active(now).filter(**{f"{kind.column}_id": OuterRef("pk")})


def held_by_others(holder_id: str, now: datetime, kind: ClaimKind) -> Q:
    """Items another person holds at ``now`` (for filtering a queue)."""
    return Q(Exists(_held(kind, now).exclude(holder_id=holder_id)))


def held_by(holder_id: str, now: datetime, kind: ClaimKind) -> Q:
    """Items ``holder_id`` holds at ``now``."""
    return Q(Exists(_held(kind, now).filter(holder_id=holder_id)))


def claim_in_force(item: Claimable, now: datetime) -> ReviewClaim | None:
    """The item's claim if one is in force at ``now``, from the row loaded with the item
    (``select_related("claim")``) when there is one, else from the database."""
    try:
        claim = item.claim
    except ReviewClaim.DoesNotExist:
        return None
    return claim if claim.expires_at > now else None


def claim_holder_is(claim: ReviewClaim, actor: Actor) -> bool:
    return actor.type == ActorType.USER and claim.holder_id == actor.id


def claim_refusal(item: Claimable, actor: Actor, now: datetime) -> ReviewClaim | None:
    """The claim that refuses ``actor``'s decision on ``item`` (locked by the caller, as a
    claim locks it too): someone else's, in force at ``now``; None when the actor may decide."""
    claim = claims_active(now).filter(_kind_of(item).of(item.pk)).first()
    return claim if claim is not None and not claim_holder_is(claim, actor) else None


def claim_end(item: Claimable) -> None:
    """A decided item is no longer held (called under the item's lock by a decision)."""
    ReviewClaim.objects.filter(_kind_of(item).of(item.pk)).delete()


@dataclass
class ClaimOutcome:
    """What a claim (or a release) did: the items it took (or let go), those another person
    holds, and those no longer open (decided meanwhile, or gone)."""

    done: list[Any] = field(default_factory=list)
    held: list[tuple[Any, ReviewClaim]] = field(default_factory=list)
    closed: int = 0
    until: datetime | None = None
    kind: ClaimKind = PROMOTIONS


def _person(actor: Actor, kind: ClaimKind) -> None:
    if actor.type != ActorType.USER:
        raise ClaimError(f"Only a person claims {kind.target.replace('_', ' ')}.")


def _locked(ids: Collection[uuid.UUID], kind: ClaimKind) -> list[Any]:
    # A fixed order: two reviewers claiming overlapping batches lock them in the same order.
    if kind is CONFLICTS:
        # A resolution locks its fact, then the fact's open conflicts: a claim takes the same
        # order, so a claim and a resolution never wait on each other in a cycle.
        facts = Conflict.objects.filter(pk__in=list(ids)).values("fact_id")
        list(Fact.objects.select_for_update().filter(pk__in=facts).order_by("pk").values("pk"))
    return list(
        kind.model.objects.select_for_update(of=("self",))
        .select_related(kind.related)
        .filter(pk__in=list(ids))
        .order_by("pk")
    )


def _claims_on(items: list[Any], kind: ClaimKind, now: datetime) -> dict[Any, ReviewClaim]:
    claims = claims_active(now).filter(kind.of([item.pk for item in items]))
    return {kind.item_of(claim): claim for claim in claims}


@transaction.atomic
def claims_take(
    *,
    tenant: Tenant,
    request_ids: Sequence[uuid.UUID],
    actor: Actor,
    duration: timedelta | None = None,
    kind: ClaimKind = PROMOTIONS,
) -> ClaimOutcome:
    """Claim the open items ``request_ids`` for ``actor`` (a person) for ``duration`` (default:
    the tenant's), renewing those they hold. Another person's stay theirs (``held``); those no
    longer open are counted in ``closed``. One audit event names every item taken."""
    _person(actor, kind)
    if len(request_ids) > CLAIM_BATCH_LIMIT:
        raise ClaimError(f"One claim takes at most {CLAIM_BATCH_LIMIT} {kind.noun}s.")
    now = timezone.now()
    until = now + (duration or tenant.review_claim_duration)
    outcome = ClaimOutcome(until=until, kind=kind)
    locked = _locked(request_ids, kind)
    outcome.closed = len(set(request_ids)) - len(locked)
    claims = _claims_on(locked, kind, now)
    for item in locked:
        claim = claims.get(item.pk)
        if item.state != kind.open_state:
            outcome.closed += 1
        elif claim is not None and not claim_holder_is(claim, actor):
            outcome.held.append((item, claim))
        else:
            outcome.done.append(item)
    if not outcome.done:
        return outcome
    ReviewClaim.objects.bulk_create(
        [
            ReviewClaim(
                tenant_id=tenant.pk,
                holder_id=actor.id,
                holder_label=actor.label[:200],
                claimed_at=now,
                expires_at=until,
                **{kind.column: item},
            )
            for item in outcome.done
        ],
        update_conflicts=True,
        unique_fields=[kind.column],
        update_fields=["holder_id", "holder_label", "claimed_at", "expires_at"],
    )
    _audit(tenant, actor, "review.claim", outcome, reason="claimed for review", until=until)
    return outcome


def _audit(
    tenant: Tenant,
    actor: Actor,
    action: str,
    outcome: ClaimOutcome,
    *,
    reason: str,
    until: datetime | None = None,
) -> None:
    ids = [str(item.pk) for item in outcome.done]
    data: dict[str, Any] = {"reason": reason, "count": len(ids)}
    if until is not None:
        data["until"] = until.isoformat()
    audit_record(
        tenant=tenant,
        actor=actor,
        action=action,
        object_type=outcome.kind.object_type,
        object_id=ids[0],
        data={**data, "target": {outcome.kind.target: ids}},
        lane_key=f"review-claims:{actor.id}",
    )


@transaction.atomic
def claims_release(
    *,
    tenant: Tenant,
    actor: Actor,
    request_ids: Sequence[uuid.UUID] | None = None,
    kind: ClaimKind = PROMOTIONS,
) -> ClaimOutcome:
    """Let go of ``actor``'s claims on ``request_ids`` (all of this ``kind`` when None), never
    another person's (``held``). One audit event names every item released."""
    _person(actor, kind)
    now = timezone.now()
    outcome = ClaimOutcome(kind=kind)
    mine = claims_active(now).filter(holder_id=actor.id)
    if request_ids is not None:
        if len(request_ids) > CLAIM_BATCH_LIMIT:
            raise ClaimError(f"One release takes at most {CLAIM_BATCH_LIMIT} {kind.noun}s.")
        locked = _locked(request_ids, kind)
        claims = _claims_on(locked, kind, now)
        for item in locked:
            claim = claims.get(item.pk)
            if claim is None:
                continue
            if claim_holder_is(claim, actor):
                outcome.done.append(item)
            else:
                outcome.held.append((item, claim))
    else:
        outcome.done = [
            getattr(claim, kind.column)
            for claim in mine.filter(**{f"{kind.column}__isnull": False})
            .select_for_update(of=("self",))
            .select_related(kind.column)
        ]
    if not outcome.done:
        return outcome
    ReviewClaim.objects.filter(kind.of([item.pk for item in outcome.done])).filter(
        holder_id=actor.id
    ).delete()
    _audit(tenant, actor, "review.release", outcome, reason="released by its holder")
    return outcome


def claims_held_count(*, holder_id: str, kind: ClaimKind = PROMOTIONS) -> int:
    """How many open items of ``kind`` ``holder_id`` holds."""
    held = {"holder_id": holder_id, f"{kind.column}__state": kind.open_state}
    return claims_active().filter(**held).count()
