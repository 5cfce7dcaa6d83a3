"""Review decisions: promotion requests, approvals and rejections (and their reversal),
conflict resolution. Each runs in one transaction, locks what it changes, needs a reason,
refuses a decision on one's own evidence (:class:`OwnEvidence`) or on an item another
reviewer holds (:class:`Claimed`), and appends to the audit chain.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from apps.audit.services import audit_record
from apps.core.actors import Actor, ActorType
from apps.core.validation import canonical_json
from apps.records import signals as records_signals
from apps.records.models import (
    Conflict,
    ConflictState,
    Fact,
    MemoryRecord,
    Observation,
    PromotionEvent,
    PromotionRequest,
    PromotionState,
    RecordStatus,
    Resolution,
    SourceKind,
    Trust,
    lifetime,
)
from apps.records.services import (
    RecordError,
    record_confirm,
    record_digest,
    sensitivity_rank,
)
from apps.records.validation import MAX_VALUE_BYTES, json_problem, render_content
from apps.review.models import ReviewClaim
from apps.tenancy.models import Tenant
from apps.work.outbox import record_embedding_enqueue
from apps.work.queued import work_enqueue

from .claims import Claimable, claim_end, claim_kind, claim_refusal


class OwnEvidence(RecordError):
    status = 403


class Claimed(RecordError):
    """Another person holds the promotion request or the conflict (a claim,
    :mod:`apps.review.claims`): a decision by anyone else is refused until the claim ends."""

    status = 409

    def __init__(self, claim: ReviewClaim) -> None:
        super().__init__(
            f"{claim.holder_label} is working on this {claim_kind(claim).noun} (claimed until "
            f"{claim.expires_at:%H:%M} UTC): leave it to them, or wait until the claim ends.",
            claimed_by=claim.holder_label,
            # In the API's spelling of a time (``Z``), as the listing shows it.
            claimed_until=claim.expires_at.isoformat().replace("+00:00", "Z"),
        )
        self.claim = claim


class PersonRequired(RecordError):
    """The tenant's policy (``promotion_requires_person``) reserves confirming a record to a
    person; an agent credential's approval is refused."""

    status = 403
    slug = "promotion-requires-person"

    def __init__(self) -> None:
        super().__init__(
            "This tenant's policy promotion_requires_person reserves promotions to a person: "
            "an agent credential cannot approve one. A reviewer approves it in the console.",
            policy="promotion_requires_person",
        )


def _refuse_if_claimed(item: Claimable, actor: Actor, now: datetime) -> None:
    """Refuse a decision on ``item`` (locked by the caller, as a claim locks it too) while
    someone other than ``actor`` holds it; a decision ends the claim."""
    claim = claim_refusal(item, actor, now)
    if claim is not None:
        raise Claimed(claim)


def _lock_record(record: MemoryRecord) -> MemoryRecord:
    Fact.objects.select_for_update().filter(pk=record.fact_id).first()
    return MemoryRecord.objects.select_for_update().get(pk=record.pk)


@transaction.atomic
def promotion_request_create(
    *, record: MemoryRecord, actor: Actor, evidence: Any, reason: str
) -> PromotionRequest:
    """Ask reviewers to confirm a provisional record."""
    record = _lock_record(record)
    if record.trust == Trust.CONFIRMED:
        raise RecordError("The record is already confirmed.")
    if record.status != RecordStatus.ACTIVE:
        raise RecordError(f"A {record.status} record cannot be promoted.")
    if evidence is not None and (problem := json_problem(evidence)):
        raise RecordError(problem, status=400, field="evidence")
    existing = PromotionRequest.objects.filter(record=record, state=PromotionState.OPEN).first()
    if existing is not None:
        raise RecordError(
            "The record already has an open promotion request.",
            promotion_request=str(existing.pk),
        )
    request = PromotionRequest.objects.create(
        tenant_id=record.tenant_id,
        record=record,
        evidence=evidence if evidence is not None else {},
        reason=reason,
        **actor.fields("requested_by"),
        requested_at=timezone.now(),
    )
    audit_record(
        tenant=record.tenant_id,
        actor=actor,
        action="promotion.request",
        object_type="promotion_request",
        object_id=str(request.pk),
        data={"record": str(record.pk)},
    )
    return request


def _require_reason(reason: str) -> None:
    """A decision is kept with why it was taken: a blank reason is refused before any lock."""
    if not isinstance(reason, str) or not reason.strip():
        raise RecordError(
            "Say why: a decision needs a non-empty reason.", status=400, field="reason"
        )


def _audit_request(
    request: PromotionRequest, actor: Actor, action: str, reason: str, *, lane: bool = True
) -> None:
    """Audit a decision on ``request``; its target names the version by ids, never content."""
    record = request.record
    ids = {"record": str(record.pk), "fact": str(record.fact_id)}
    target = {**ids, "subject": record.subject, "key": record.key}
    audit_record(
        tenant=request.tenant_id,
        actor=actor,
        action=f"promotion.{action}",
        object_type="promotion_request",
        object_id=str(request.pk),
        data={"record": str(record.pk), "reason": reason, "target": target},
        lane_key=str(record.fact_id) if lane else "",
    )


def _wrote(actor: Actor, record: MemoryRecord) -> bool:
    return (actor.type, actor.id) == (record.writer_type, record.writer_id)


def _lock_request(request: PromotionRequest, state: str = PromotionState.OPEN) -> PromotionRequest:
    locked = (
        PromotionRequest.objects.select_for_update().select_related("record").get(pk=request.pk)
    )
    if locked.state == state:
        return locked
    if state == PromotionState.OPEN:
        raise RecordError(f"The promotion request is already {locked.state}.", state=locked.state)
    raise RecordError(
        f"The promotion request is {locked.state}, not {state}.", status=409, state=locked.state
    )


def _decide(
    request: PromotionRequest, state: str, actor: Actor, reason: str, now: datetime
) -> None:
    """Record the decision on ``request`` (locked, open); a decided request is held by no one."""
    claim_end(request)
    request.state = state
    request.decided_by_type, request.decided_by_id = actor.type, actor.id
    request.decided_by_label = actor.label[:200]
    request.decided_at = now
    request.decision_reason = reason
    request.save()


@transaction.atomic
def promotion_approve(*, request: PromotionRequest, actor: Actor, reason: str) -> PromotionEvent:
    """Confirm the record, for a non-empty ``reason``. The record's own writer cannot approve
    it: promotion needs an independent source or a person; where the tenant's policy says so
    (``promotion_requires_person``), a person (:class:`PersonRequired`)."""
    _require_reason(reason)
    if actor.type != ActorType.USER and (
        Tenant.objects.filter(pk=request.tenant_id, promotion_requires_person=True).exists()
    ):
        raise PersonRequired()
    request = _lock_request(request)
    now = timezone.now()
    _refuse_if_claimed(request, actor, now)
    record = _lock_record(request.record)
    if _wrote(actor, record):
        raise OwnEvidence("A writer cannot promote its own record; ask an independent reviewer.")
    if record.status != RecordStatus.ACTIVE:
        # The same rule as for opening a request: a version that lost a conflict (or was
        # otherwise retired) since the request was opened is no longer a candidate.
        raise RecordError(f"A {record.status} record cannot be promoted.", status=409)
    _decide(request, PromotionState.APPROVED, actor, reason, now)
    _audit_request(request, actor, "approve", reason)
    if record.trust == Trust.CONFIRMED:
        event = PromotionEvent.objects.filter(record=record).order_by("-promoted_at").first()
        assert event is not None
        return event
    evidence = {"request": str(request.pk), "evidence": request.evidence}
    return record_confirm(record.tenant, record, actor, evidence, request, now)


@transaction.atomic
def promotion_reject(*, request: PromotionRequest, actor: Actor, reason: str) -> PromotionRequest:
    """Close the request, for a non-empty ``reason``; the record stays provisional (and
    expires on its short clock)."""
    _require_reason(reason)
    request = _lock_request(request)
    now = timezone.now()
    _refuse_if_claimed(request, actor, now)
    _decide(request, PromotionState.REJECTED, actor, reason, now)
    _audit_request(request, actor, "reject", reason, lane=False)
    return request


def _supersede(loser: MemoryRecord, winner: MemoryRecord, now: datetime) -> None:
    loser.status = RecordStatus.SUPERSEDED
    loser.superseded_by = winner
    loser.superseded_at = now
    if loser.current_from is not None and loser.current_until is None:
        loser.current_until = now
    loser.is_current = False
    loser.save(
        update_fields=["status", "superseded_by", "superseded_at", "current_until", "is_current"]
    )


# What a reviewer may decide; ``not_a_conflict`` is the system's alone (a cross-scope pair).
REVIEW_RESOLUTIONS = (Resolution.KEEP_CURRENT, Resolution.ACCEPT_NEW, Resolution.CORRECTED)


@transaction.atomic
def conflict_resolve(
    *, conflict: Conflict, actor: Actor, resolution: str, reason: str, value: Any = None
) -> Conflict:
    """Settle a contradiction, for a non-empty ``reason``. The losing version becomes
    ``superseded``, never deleted.

    ``corrected`` writes a new version. Only a person's correction is a ``user_action`` and
    confirmed at once; a credential's is ``derived`` from the conflict and provisional, so it
    needs promotion like any agent's write. A credential that wrote either version cannot
    resolve the conflict (:class:`OwnEvidence`): it would be confirming itself.
    """
    if resolution not in REVIEW_RESOLUTIONS:
        raise RecordError(f"Unknown resolution {resolution!r}.", status=400, field="resolution")
    _require_reason(reason)
    fact = Fact.objects.select_for_update().get(pk=conflict.fact_id)
    conflict = (
        Conflict.objects.select_for_update()
        .select_related("current_record", "contender")
        .get(pk=conflict.pk)
    )
    if conflict.state != ConflictState.OPEN:
        raise RecordError("The conflict is already resolved.", resolution=conflict.resolution)
    now = timezone.now()
    _refuse_if_claimed(conflict, actor, now)
    current, contender = conflict.current_record, conflict.contender
    by_person = actor.type == ActorType.USER
    if not by_person and (_wrote(actor, current) or _wrote(actor, contender)):
        raise OwnEvidence(
            "This credential wrote a version in this conflict, so it cannot resolve it; "
            "ask an independent reviewer."
        )
    winner: MemoryRecord
    if resolution == Resolution.KEEP_CURRENT:
        winner = current
        _supersede(contender, current, now)
    elif resolution == Resolution.ACCEPT_NEW:
        winner = contender
        _supersede(current, contender, now)
        contender.current_from = now
        contender.is_current = True
        contender.save(update_fields=["current_from", "is_current"])
    else:
        if value is None:
            raise RecordError("A corrected resolution needs a value.", status=400, field="value")
        if problem := json_problem(value):
            raise RecordError(problem, status=400, field="value")
        if len(canonical_json(value).encode()) > MAX_VALUE_BYTES:
            raise RecordError("The corrected value is too large.", status=413, field="value")
        fact.last_version += 1
        sensitivity = max((current.sensitivity, contender.sensitivity), key=sensitivity_rank)
        source_kind = SourceKind.USER_ACTION if by_person else SourceKind.DERIVED
        # A person's correction is confirmed below (its lifetime set there); an agent's
        # starts on the provisional clock like any write.
        provisional_life = lifetime(
            sensitivity=sensitivity,
            trust=Trust.PROVISIONAL,
            ttl=contender.ttl_requested,
            observed_at=now,
            written_at=now,
        )
        winner = MemoryRecord.objects.create(
            tenant_id=fact.tenant_id,
            fact=fact,
            subject=fact.subject,
            key=fact.key,
            version=fact.last_version,
            value=value,
            content=render_content(fact.key, value),
            source_kind=source_kind,
            source_ref=f"conflict:{conflict.pk}",
            observed_at=now,
            written_at=now,
            owner=contender.owner,
            reason=reason,
            scope_domain=contender.scope_domain,
            scope_task_type=contender.scope_task_type,
            scope_conditions=contender.scope_conditions,
            sensitivity=sensitivity,
            retention_basis=contender.retention_basis,
            consent_ref=contender.consent_ref,
            ttl_requested=contender.ttl_requested,
            expires_at=provisional_life.expires_at,
            trust=Trust.PROVISIONAL,
            status=RecordStatus.ACTIVE,
            supersedes=current,
            current_from=now,
            is_current=True,
            **actor.fields("writer"),
        )
        Observation.objects.create(
            tenant_id=fact.tenant_id,
            record=winner,
            source_kind=source_kind,
            source_ref=winner.source_ref,
            observed_at=now,
            recorded_at=now,
            reason=reason,
            **actor.fields("writer"),
        )
        _supersede(current, winner, now)
        _supersede(contender, winner, now)
        if by_person:
            record_confirm(fact.tenant, winner, actor, {"conflict": str(conflict.pk)}, None, now)
        # The corrected version gets a vector (at once where the tenant's model embeds at write).
        work_enqueue(records_signals.embed_record, winner, enqueue=record_embedding_enqueue)
    if fact.current_id != winner.pk:
        fact.current = winner
    fact.save(update_fields=["current", "last_version"])
    # Other open conflicts of this fact now compare against the new current value.
    Conflict.objects.filter(fact=fact, state=ConflictState.OPEN).exclude(pk=conflict.pk).filter(
        ~Q(current_record=winner)
    ).update(current_record=winner)
    claim_end(conflict)
    conflict.state = ConflictState.RESOLVED
    conflict.resolution = resolution
    conflict.resolved_record = winner
    conflict.resolver_type, conflict.resolver_id = actor.type, actor.id
    conflict.resolver_label = actor.label[:200]
    conflict.reason = reason
    conflict.resolved_at = now
    conflict.save()
    audit_record(
        tenant=fact.tenant_id,
        actor=actor,
        action="conflict.resolve",
        object_type="conflict",
        object_id=str(conflict.pk),
        digest=record_digest(winner) if resolution == Resolution.CORRECTED else "",
        data={
            "resolution": resolution,
            "winner": str(winner.pk),
            "reason": reason,
            "target": {
                "fact": str(fact.pk),
                "subject": fact.subject,
                "key": fact.key,
                "current": str(current.pk),
                "contender": str(contender.pk),
            },
        },
        lane_key=str(fact.pk),
    )
    return conflict


def _reopen(request: PromotionRequest, actor: Actor, action: str, reason: str) -> None:
    request.state = PromotionState.OPEN
    request.decided_by_type = request.decided_by_id = request.decided_by_label = ""
    request.decided_at = None
    request.decision_reason = ""
    request.save()
    _audit_request(request, actor, action, reason)


@transaction.atomic
def promotion_return_to_provisional(
    *, request: PromotionRequest, actor: Actor, reason: str
) -> PromotionRequest:
    """Reverse a mistaken approval: the record is provisional again (its clock counted from
    its observation, as if never confirmed) and the request open again; the reversal is one
    more audit event. Refused when the record is no longer active, or its provisional
    lifetime has ended (returning it would delete it: that is what deletion is for)."""
    if not reason.strip():
        raise RecordError("Say why the approval is reversed.", status=400, field="reason")
    request = _lock_request(request, PromotionState.APPROVED)
    record = _lock_record(request.record)
    if record.status != RecordStatus.ACTIVE:
        raise RecordError(f"A {record.status} record cannot be returned.", status=409)
    now = timezone.now()
    if record.trust == Trust.CONFIRMED:
        life = lifetime(
            sensitivity=record.sensitivity,
            trust=Trust.PROVISIONAL,
            ttl=record.ttl_requested,
            observed_at=record.observed_at,
            written_at=record.written_at,
        )
        if life.expires_at is not None and life.expires_at <= now:
            raise RecordError(
                "Its provisional lifetime has already ended: returning it would expire it at "
                "once. Delete the record instead, with a reason.",
                status=409,
            )
        record.trust = Trust.PROVISIONAL
        record.expires_at = life.expires_at
        record.save(update_fields=["trust", "expires_at"])
    _reopen(request, actor, "return_to_provisional", reason)
    return request


@transaction.atomic
def promotion_reopen(*, request: PromotionRequest, actor: Actor, reason: str) -> PromotionRequest:
    """Reverse a rejection: the request is open again (its record was never changed by the
    rejection). The rejection stays in the audit chain; the reopening is one more event."""
    if not reason.strip():
        raise RecordError("Say why the rejection is reversed.", status=400, field="reason")
    request = _lock_request(request, PromotionState.REJECTED)
    _reopen(request, actor, "reopen", reason)
    return request
