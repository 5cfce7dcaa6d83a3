"""Changes to memory records: the write path, observations, promotion, conflicts, consent.

Every service runs in one transaction, locks the fact it changes (so concurrent writes to one
fact serialise and writes to different facts do not), and appends to the audit chain. Audit
events carry ids, counts and digests, never memory content.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, TypeVar

from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.db.models import DateTimeField, F, Model, Q, QuerySet, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from apps.audit.models import ActorType
from apps.audit.services import Actor, audit_append, audit_event, audit_record, content_digest
from apps.derivations.outbox import record_embedding_enqueue, record_embedding_message
from apps.tenancy.models import Tenant
from apps.tenancy.prepared import prepared_cursor

from .claims import claim_end, claim_holder_is, claims_active
from .models import (
    DEFAULT_RETENTION,
    SENSITIVITY_ORDER,
    Conflict,
    ConflictState,
    ConsentRevocation,
    Fact,
    MemoryRecord,
    Observation,
    PromotionEvent,
    PromotionRequest,
    PromotionState,
    RecordStatus,
    Resolution,
    ReviewClaim,
    Scope,
    SourceKind,
    Trust,
    record_held,
    scope_canonical,
)
from .retention import Lifetime, Limits, lifetime
from .selectors import records_live
from .statements import insert_statement, stored
from .validation import (
    MAX_VALUE_BYTES,
    RUN_ID_RE,
    RecordInput,
    WriteRejected,
    canonical_json,
    json_equal,
    json_problem,
    render_content,
)

M = TypeVar("M", bound=Model)


class RecordError(Exception):
    """A domain rule refused the change. ``status`` is the HTTP status the API answers with."""

    status = 409

    def __init__(self, message: str, *, status: int | None = None, **extra: Any) -> None:
        super().__init__(message)
        if status is not None:
            self.status = status
        self.extra = extra


class OwnEvidence(RecordError):
    status = 403


class Claimed(RecordError):
    """Another person holds the promotion request (a claim, :mod:`apps.records.claims`): a
    decision by anyone else is refused until the claim ends."""

    status = 409

    def __init__(self, claim: ReviewClaim) -> None:
        super().__init__(
            f"{claim.holder_label} is working on this request (claimed until "
            f"{claim.expires_at:%H:%M} UTC): leave it to them, or wait until the claim ends.",
            claimed_by=claim.holder_label,
            claimed_until=claim.expires_at.isoformat(),
        )
        self.claim = claim


def _refuse_if_claimed(request: PromotionRequest, actor: Actor, now: datetime) -> None:
    """Refuse a decision on ``request`` (locked by the caller, as a claim locks it too) while
    someone other than ``actor`` holds it; a decision ends the claim."""
    claim = claims_active(now).filter(request_id=request.pk).first()
    if claim is not None and not claim_holder_is(claim, actor):
        raise Claimed(claim)


@dataclass
class WriteOutcome:
    """What a write did: ``created`` a first version, opened a ``conflict`` with a new
    version, ``observed`` the same value again, or left everything ``unchanged``."""

    record: MemoryRecord
    outcome: str
    conflict: Conflict | None = None
    promotion_request: PromotionRequest | None = None
    promoted: bool = False
    lifetime: Lifetime | None = None
    notices: list[str] = field(default_factory=list)

    @property
    def created(self) -> bool:
        return self.outcome in {"created", "conflict", "observed"}


def record_digest(record: MemoryRecord) -> str:
    """Digest of a version's content, kept by audit events and receipts instead of content."""
    return content_digest(
        {
            "subject": record.subject,
            "key": record.key,
            "value": record.value,
            "content": record.content,
        }
    )


def _source_fields(data: RecordInput) -> dict[str, str]:
    """Where a write came from, as stored on a record version and on each observation."""
    return {
        "source_kind": data.source_kind,
        "source_ref": data.source_ref,
        "source_turn_id": data.source_turn_id,
        "source_tool_call_id": data.source_tool_call_id,
        "source_run_id": data.source_run_id,
    }


def _writer_fields(actor: Actor) -> dict[str, str]:
    return {"writer_type": actor.type, "writer_id": actor.id, "writer_label": actor.label[:200]}


# Create-or-lock in one round trip. The scope is found or created first: ON CONFLICT DO
# NOTHING takes no lock on an existing scope, so writes to different facts of one scope still
# run in parallel. (A scope inserted by a transaction that commits while this statement runs
# is invisible to its snapshot: the statement then returns no row and is run again.) Then
# ON CONFLICT DO UPDATE takes the row lock on an existing fact, and the no-op update keeps
# its columns as they are. The same statement reads the tenant's retention rule for the
# write's sensitivity class, which a new version needs.
LOCK_FACT_SQL = """
WITH new_scope AS (
    INSERT INTO records_scope (id, tenant_id, domain, task_type, conditions, canonical, created_at)
    VALUES (%s, %s, %s, %s, %s, %s, %s)
    ON CONFLICT (tenant_id, canonical) DO NOTHING
    RETURNING id
), scope AS (
    SELECT id FROM new_scope
    UNION ALL
    SELECT id FROM records_scope WHERE tenant_id = %s AND canonical = %s
    LIMIT 1
), fact AS (
    INSERT INTO records_fact (id, tenant_id, subject, key, scope_id, last_version, created_at)
    SELECT %s, %s, %s, %s, scope.id, 0, %s FROM scope
    ON CONFLICT (tenant_id, subject, key, scope_id) DO UPDATE SET subject = EXCLUDED.subject
    RETURNING id, current_id, last_version, created_at, scope_id
)
SELECT fact.id, fact.current_id, fact.last_version, fact.created_at, fact.scope_id,
       rule.id IS NOT NULL, rule.provisional_max, rule.confirmed_max
  FROM fact
  LEFT JOIN records_retentionrule rule ON rule.tenant_id = %s AND rule.sensitivity = %s
"""


def _loaded(model: type[M], **values: Any) -> M:
    """An instance of ``model`` as the ORM loads a row of these columns (``Model.from_db``;
    the other fields deferred), from values read by a statement of this module."""
    fields = [f for f in model._meta.concrete_fields if f.attname in values]
    return model.from_db(
        connection.alias, [f.attname for f in fields], [values[f.attname] for f in fields]
    )


# The fact's pointers after a new version: its current version (unchanged beside a conflict)
# and the last version number.
FACT_ADVANCE_SQL = "UPDATE records_fact SET current_id = %s, last_version = %s WHERE id = %s"


def _lock_fact(tenant: Tenant, data: RecordInput) -> tuple[Fact, Limits]:
    """The fact of ``data``'s subject, key and scope, created (with its scope) if new,
    locked until commit; and the class's retention limits."""
    canonical = scope_canonical(data.scope_domain, data.scope_task_type, data.scope_conditions)
    conditions = json.dumps(data.scope_conditions, ensure_ascii=False)
    row = None
    for _attempt in range(2):
        now = timezone.now()
        with prepared_cursor(generic_plan=False) as cursor:
            cursor.execute(
                LOCK_FACT_SQL,
                [
                    uuid.uuid4(),
                    tenant.pk,
                    data.scope_domain,
                    data.scope_task_type,
                    conditions,
                    canonical,
                    now,
                    tenant.pk,
                    canonical,
                    uuid.uuid4(),
                    tenant.pk,
                    data.subject,
                    data.key,
                    now,
                    tenant.pk,
                    data.sensitivity,
                ],
            )
            row = cursor.fetchone()
        if row is not None:
            break
    assert row is not None, "a scope created concurrently is visible to the second statement"
    fact = _loaded(
        Fact,
        id=row[0],
        tenant_id=tenant.pk,
        subject=data.subject,
        key=data.key,
        current_id=row[1],
        last_version=row[2],
        created_at=row[3],
        scope_id=row[4],
    )
    fact.tenant = tenant
    limits = (row[6], row[7]) if row[5] else DEFAULT_RETENTION[data.sensitivity]
    return fact, limits


def scope_for(
    *, tenant: Tenant, domain: str, task_type: str = "", conditions: dict[str, Any] | None = None
) -> Scope:
    """The tenant's scope of this canonical form, created if new (the write path does the
    same inside its statement; bulk loads and fixtures call this)."""
    conditions = conditions or {}
    canonical = scope_canonical(domain, task_type, conditions)
    scope, _created = Scope.objects.get_or_create(
        tenant=tenant,
        canonical=canonical,
        defaults={"domain": domain, "task_type": task_type, "conditions": conditions},
    )
    return scope


def record_write(*, tenant: Tenant, actor: Actor, data: RecordInput) -> WriteOutcome:
    """The write boundary's only door. ``data`` has passed the write contract
    (:class:`~apps.records.serializers.RecordWriteInput`).

    * no live value: a first version (provisional), current at once;
    * same value from an independent source: an observation, and a promotion request (or an
      immediate promotion where the tenant's policy says so);
    * same value from the same source (or the writer attesting itself): no new evidence;
    * different value: a new provisional version and an open conflict; the current value
      stays current until a reviewer resolves it.
    """
    now = timezone.now()
    if data.consent_ref and ConsentRevocation.objects.filter(consent_ref=data.consent_ref).exists():
        raise WriteRejected(
            {"retention.consent_ref": ["This consent has been revoked."]}, status=422
        )
    # No savepoint: nothing below is caught and recovered from inside a caller's transaction,
    # and a write is the hottest path (two fewer round trips). A refusal found inside is
    # raised after the block, which then has written nothing.
    with transaction.atomic(savepoint=False):
        refusal = session_run_refusal(tenant=tenant, data=data)
        if refusal is None:
            return _record_write(tenant, actor, data, now)
    raise refusal


def session_run_refusal(*, tenant: Tenant, data: RecordInput) -> WriteRejected | None:
    """Why a ``session``-retained write may not name ``source.run_id`` (None when it may):
    400 for what is not a run id at all, 422 for an id that names no open run of ``tenant``.

    The run must be an open run of ``tenant``: the record ends with it. An unknown id, a
    closed run and another tenant's run get the same answer, so the refusal reveals nothing
    about other tenants. The run stays locked until the write commits (a close locks it
    too), so the close that expires the run's session records cannot miss this one.
    """
    from apps.state.models import Run, RunState

    from .models import RetentionBasis

    if data.retention_basis != RetentionBasis.SESSION:
        return None
    try:
        if not RUN_ID_RE.fullmatch(data.source_run_id):
            raise ValueError(data.source_run_id)
        run_id = uuid.UUID(data.source_run_id)
    except ValueError:
        return WriteRejected(
            {"source.run_id": ["Not a run id: name the run POST /api/v1/runs returned."]}
        )
    state = (
        Run.objects.select_for_update(no_key=True)
        .filter(tenant=tenant, pk=run_id)
        .values_list("state", flat=True)
        .first()
    )
    if state != RunState.OPEN:
        return WriteRejected(
            {
                "source.run_id": [
                    "No open run with this id in this tenant; session retention ends with its run."
                ]
            },
            status=422,
        )
    return None


def _record_write(tenant: Tenant, actor: Actor, data: RecordInput, now: datetime) -> WriteOutcome:
    fact, limits = _lock_fact(tenant, data)
    current: MemoryRecord | None = None
    if fact.current_id is not None:
        current = records_live(now).filter(pk=fact.current_id).first()
        if current is None:
            # The current version expired: it stops being current here, so a legal hold that
            # later brings it back into view cannot show it next to the version written now.
            MemoryRecord.objects.filter(pk=fact.current_id).update(
                is_current=False,
                current_until=Coalesce(
                    F("current_until"), Value(now, output_field=DateTimeField())
                ),
            )
    contenders: list[MemoryRecord] = []
    if current is not None:
        contenders = list(
            records_live(now).filter(
                pk__in=Conflict.objects.filter(fact=fact, state=ConflictState.OPEN).values(
                    "contender_id"
                )
            )
        )
        for candidate in [current, *contenders]:
            if json_equal(candidate.value, data.value):
                return _observe(tenant, fact, candidate, data, actor, now, limits)

    fact.last_version += 1
    life = lifetime(
        sensitivity=data.sensitivity,
        trust=Trust.PROVISIONAL,
        ttl=data.ttl,
        written_at=now,
        limits=limits,
    )
    record = MemoryRecord(
        tenant=tenant,
        fact=fact,
        subject=data.subject,
        key=data.key,
        version=fact.last_version,
        value=data.value,
        content=data.content,
        **_source_fields(data),
        observed_at=data.observed_at,
        written_at=now,
        owner=data.owner,
        reason=data.reason,
        scope_domain=data.scope_domain,
        scope_task_type=data.scope_task_type,
        scope_conditions=data.scope_conditions,
        sensitivity=data.sensitivity,
        retention_basis=data.retention_basis,
        consent_ref=data.consent_ref,
        ttl_requested=data.ttl,
        expires_at=life.expires_at,
        redaction_state=data.redaction_state,
        redaction_fields=data.redaction_fields,
        trust=Trust.PROVISIONAL,
        status=RecordStatus.ACTIVE,
        supersedes=current,
        current_from=now if current is None else None,
        is_current=current is None,
        **_writer_fields(actor),
    )
    # The version, its first observation, the fact's pointers, the embedding work
    # (derivations: embedded after commit, via the outbox) and the audit event: one
    # statement, the write path's one fast path (apps.records.statements).
    changes = [
        insert_statement(record),
        insert_statement(_observation(tenant, record, data, actor, now)),
    ]
    conflict = None
    if current is None:
        fact.current_id = record.pk
        outcome = "created"
    else:
        conflict = Conflict(
            tenant=tenant, fact=fact, current_record=current, contender=record, opened_at=now
        )
        changes.append(insert_statement(conflict))
        outcome = "conflict"
    changes.append((FACT_ADVANCE_SQL, [fact.current_id, fact.last_version, fact.pk]))
    changes.append(insert_statement(record_embedding_message(record)))
    # Every event of one fact's change goes to the fact's lane (see audit_event).
    lane_key = str(fact.pk)
    audit_append(
        audit_event(
            tenant=tenant,
            actor=actor,
            action="record.write",
            object_type="record",
            object_id=str(record.pk),
            digest=record_digest(record),
            data={
                "version": record.version,
                "fact": str(fact.pk),
                "sensitivity": record.sensitivity,
            },
            lane_key=lane_key,
        ),
        alongside=changes,
        prepared=True,
    )
    record = stored(record)
    record.fact = fact
    if conflict is not None:
        conflict = stored(conflict)
    if conflict is not None:
        audit_record(
            tenant=tenant,
            actor=actor,
            action="conflict.open",
            object_type="conflict",
            object_id=str(conflict.pk),
            data={"current": str(current.pk) if current else None, "contender": str(record.pk)},
            lane_key=lane_key,
        )
    notices = []
    if life.clipped:
        notices.append(
            f"retention.ttl was longer than the {data.sensitivity} class allows for "
            f"provisional records; expires_at was clipped to the class maximum."
        )
    return WriteOutcome(record, outcome, conflict=conflict, lifetime=life, notices=notices)


def _observation(
    tenant: Tenant, record: MemoryRecord, data: RecordInput, actor: Actor, now: datetime
) -> Observation:
    """An observation of ``record`` by this write (unsaved: it goes in the write's statement)."""
    return Observation(
        tenant=tenant,
        record=record,
        **_source_fields(data),
        observed_at=data.observed_at,
        recorded_at=now,
        reason=data.reason,
        **_writer_fields(actor),
    )


def _class_raise(
    tenant: Tenant,
    record: MemoryRecord,
    data: RecordInput,
    actor: Actor,
    limits: Limits,
) -> list[str]:
    """Apply the sensitivity of a re-observation of ``record`` (its fact locked): a higher
    class raises the record's class and shortens its lifetime to that class's rule (never
    lengthens it); a lower one changes nothing. Returns the notices saying which."""
    from apps.derivations.models import Summary
    from apps.derivations.propagation import summaries_citing

    held, observed = _sensitivity_rank(record.sensitivity), _sensitivity_rank(data.sensitivity)
    if observed < held:
        return [
            f"Observed as {data.sensitivity}; the record stays {record.sensitivity}: a lower "
            f"class never lowers a record's class, so nothing about it changed."
        ]
    if observed == held:
        return []
    previous_class, previous_expiry = record.sensitivity, record.expires_at
    rule = lifetime(
        sensitivity=data.sensitivity,
        trust=record.trust,
        ttl=record.ttl_requested,
        written_at=record.written_at,
        limits=limits,
    )
    expires_at = previous_expiry
    if rule.expires_at is not None and (expires_at is None or rule.expires_at < expires_at):
        expires_at = rule.expires_at
    record.sensitivity = data.sensitivity
    record.expires_at = expires_at
    record.save(update_fields=["sensitivity", "expires_at"])
    # A summary is as sensitive as the most sensitive thing it cites.
    summaries = Summary.objects.filter(
        pk__in=summaries_citing([record.pk]),
        sensitivity__in=SENSITIVITY_ORDER[:observed],
    ).update(sensitivity=data.sensitivity)
    audit_record(
        tenant=tenant,
        actor=actor,
        action="record.reclassify",
        object_type="record",
        object_id=str(record.pk),
        data={
            "from": previous_class,
            "to": record.sensitivity,
            "expires_at_before": previous_expiry.isoformat() if previous_expiry else None,
            "expires_at": expires_at.isoformat() if expires_at else None,
            "summaries_raised": summaries,
            "reason": "re-observed at a higher sensitivity",
        },
        lane_key=str(record.fact_id),
    )
    if expires_at == previous_expiry:
        lifetime_note = "its expires_at stays as it was (already within the class's rule)"
    else:
        lifetime_note = (
            f"its expires_at was shortened to the {record.sensitivity} class's rule "
            f"({expires_at.isoformat() if expires_at else 'never'})"
        )
    return [
        f"Observed as {record.sensitivity}: the record's class was raised from "
        f"{previous_class} to {record.sensitivity}, and {lifetime_note}."
    ]


def _observe(
    tenant: Tenant,
    fact: Fact,
    record: MemoryRecord,
    data: RecordInput,
    actor: Actor,
    now: datetime,
    limits: Limits,
) -> WriteOutcome:
    # Before the duplicate check: a stricter class binds even when the evidence is not new.
    class_notices = _class_raise(tenant, record, data, actor, limits)
    outcome = _observe_evidence(tenant, fact, record, data, actor, now)
    outcome.notices[:0] = class_notices
    return outcome


def _observe_evidence(
    tenant: Tenant,
    fact: Fact,
    record: MemoryRecord,
    data: RecordInput,
    actor: Actor,
    now: datetime,
) -> WriteOutcome:
    if record.observations.filter(source_ref=data.source_ref).exists():
        return WriteOutcome(record, "unchanged")
    observation = _observation(tenant, record, data, actor, now)
    observation.save(force_insert=True)
    lane_key = str(fact.pk)
    audit_record(
        tenant=tenant,
        actor=actor,
        action="record.observe",
        object_type="record",
        object_id=str(record.pk),
        data={"observation": str(observation.pk)},
        lane_key=lane_key,
    )
    independent = (actor.type, actor.id) != (record.writer_type, record.writer_id)
    if not independent or record.trust == Trust.CONFIRMED:
        notices = (
            []
            if independent
            else [
                "Observed again by the record's own writer: recorded, but a writer cannot "
                "corroborate itself, so no promotion was requested."
            ]
        )
        return WriteOutcome(record, "observed", notices=notices)
    evidence = {"observations": [str(o) for o in record.observations.values_list("pk", flat=True)]}
    if tenant.auto_promote_on_second_observation:
        _promote(
            tenant, record, Actor.system("second independent observation"), evidence, None, now
        )
        return WriteOutcome(record, "observed", promoted=True)
    request = PromotionRequest.objects.filter(record=record, state=PromotionState.OPEN).first()
    if request is None:
        request = PromotionRequest.objects.create(
            tenant=tenant,
            record=record,
            evidence=evidence,
            reason="second independent observation",
            requested_by_type=actor.type,
            requested_by_id=actor.id,
            requested_by_label=actor.label[:200],
            requested_at=now,
        )
        audit_record(
            tenant=tenant,
            actor=actor,
            action="promotion.request",
            object_type="promotion_request",
            object_id=str(request.pk),
            data={"record": str(record.pk), "automatic": True},
            lane_key=lane_key,
        )
    else:
        request.evidence = evidence
        request.save(update_fields=["evidence"])
    return WriteOutcome(record, "observed", promotion_request=request)


def _promote(
    tenant: Tenant,
    record: MemoryRecord,
    actor: Actor,
    evidence: dict[str, Any],
    request: PromotionRequest | None,
    now: datetime,
) -> PromotionEvent:
    life = lifetime(
        sensitivity=record.sensitivity,
        trust=Trust.CONFIRMED,
        ttl=record.ttl_requested,
        written_at=record.written_at,
    )
    record.trust = Trust.CONFIRMED
    record.expires_at = life.expires_at
    record.save(update_fields=["trust", "expires_at"])
    event = PromotionEvent.objects.create(
        tenant=tenant,
        record=record,
        request=request,
        promoted_by_type=actor.type,
        promoted_by_id=actor.id,
        promoted_by_label=actor.label[:200],
        evidence=evidence,
        promoted_at=now,
    )
    audit_record(
        tenant=tenant,
        actor=actor,
        action="record.promote",
        object_type="record",
        object_id=str(record.pk),
        data={
            "promotion_event": str(event.pk),
            "request": str(request.pk) if request else None,
        },
        # Every event of one fact's change goes to the fact's lane (see audit_event).
        lane_key=str(record.fact_id),
    )
    return event


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
        requested_by_type=actor.type,
        requested_by_id=actor.id,
        requested_by_label=actor.label[:200],
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


def _record_target(record: MemoryRecord) -> dict[str, str]:
    """What an audit event about one version names as its target: ids, never content."""
    return {
        "record": str(record.pk),
        "fact": str(record.fact_id),
        "subject": record.subject,
        "key": record.key,
    }


def _wrote(actor: Actor, record: MemoryRecord) -> bool:
    return (actor.type, actor.id) == (record.writer_type, record.writer_id)


def _lock_request(request: PromotionRequest) -> PromotionRequest:
    locked = (
        PromotionRequest.objects.select_for_update().select_related("record").get(pk=request.pk)
    )
    if locked.state != PromotionState.OPEN:
        raise RecordError(f"The promotion request is already {locked.state}.", state=locked.state)
    return locked


@transaction.atomic
def promotion_approve(*, request: PromotionRequest, actor: Actor, reason: str) -> PromotionEvent:
    """Confirm the record, for a non-empty ``reason``. The record's own writer cannot approve
    it: promotion needs an independent source or a person."""
    _require_reason(reason)
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
    claim_end(request=request)
    request.state = PromotionState.APPROVED
    request.decided_by_type, request.decided_by_id = actor.type, actor.id
    request.decided_by_label = actor.label[:200]
    request.decided_at = now
    request.decision_reason = reason
    request.save()
    audit_record(
        tenant=record.tenant_id,
        actor=actor,
        action="promotion.approve",
        object_type="promotion_request",
        object_id=str(request.pk),
        data={"record": str(record.pk), "reason": reason, "target": _record_target(record)},
        lane_key=str(record.fact_id),  # the lane of record.promote below (see audit_event)
    )
    if record.trust == Trust.CONFIRMED:
        event = PromotionEvent.objects.filter(record=record).order_by("-promoted_at").first()
        assert event is not None
        return event
    evidence = {"request": str(request.pk), "evidence": request.evidence}
    return _promote(record.tenant, record, actor, evidence, request, now)


@transaction.atomic
def promotion_reject(*, request: PromotionRequest, actor: Actor, reason: str) -> PromotionRequest:
    """Close the request, for a non-empty ``reason``; the record stays provisional (and
    expires on its short clock)."""
    _require_reason(reason)
    request = _lock_request(request)
    now = timezone.now()
    _refuse_if_claimed(request, actor, now)
    claim_end(request=request)
    request.state = PromotionState.REJECTED
    request.decided_by_type, request.decided_by_id = actor.type, actor.id
    request.decided_by_label = actor.label[:200]
    request.decided_at = now
    request.decision_reason = reason
    request.save()
    audit_record(
        tenant=request.tenant_id,
        actor=actor,
        action="promotion.reject",
        object_type="promotion_request",
        object_id=str(request.pk),
        data={
            "record": str(request.record_id),
            "reason": reason,
            "target": _record_target(request.record),
        },
    )
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
    current, contender = conflict.current_record, conflict.contender
    by_person = actor.type == ActorType.USER
    if not by_person and (_wrote(actor, current) or _wrote(actor, contender)):
        raise OwnEvidence(
            "This credential wrote a version in this conflict, so it cannot resolve it; "
            "ask an independent reviewer."
        )
    now = timezone.now()
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
        sensitivity = max((current.sensitivity, contender.sensitivity), key=_sensitivity_rank)
        source_kind = SourceKind.USER_ACTION if by_person else SourceKind.DERIVED
        # A person's correction is confirmed below (its lifetime set there); an agent's
        # starts on the provisional clock like any write.
        provisional_life = lifetime(
            sensitivity=sensitivity,
            trust=Trust.PROVISIONAL,
            ttl=contender.ttl_requested,
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
            **_writer_fields(actor),
        )
        Observation.objects.create(
            tenant_id=fact.tenant_id,
            record=winner,
            source_kind=source_kind,
            source_ref=winner.source_ref,
            observed_at=now,
            recorded_at=now,
            reason=reason,
            **_writer_fields(actor),
        )
        _supersede(current, winner, now)
        _supersede(contender, winner, now)
        if by_person:
            _promote(fact.tenant, winner, actor, {"conflict": str(conflict.pk)}, None, now)
        record_embedding_enqueue(winner)  # derivations: the corrected version gets a vector
    if fact.current_id != winner.pk:
        fact.current = winner
    fact.save(update_fields=["current", "last_version"])
    # Other open conflicts of this fact now compare against the new current value.
    Conflict.objects.filter(fact=fact, state=ConflictState.OPEN).exclude(pk=conflict.pk).filter(
        ~Q(current_record=winner)
    ).update(current_record=winner)
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
        lane_key=str(fact.pk),  # the lane of record.promote above (see audit_event)
    )
    return conflict


def _sensitivity_rank(value: str) -> int:
    return SENSITIVITY_ORDER.index(value)


@transaction.atomic
def consent_revoke(
    *, tenant: Tenant, consent_ref: str, actor: Actor, reason: str
) -> ConsentRevocation:
    """Expire everything written under ``consent_ref`` (except what a legal hold keeps) and
    refuse new writes citing it. Revoking twice is harmless."""
    from apps.api.idempotency import purge_responses_about
    from apps.derivations.propagation import deletion_propagate

    existing = ConsentRevocation.objects.filter(consent_ref=consent_ref).first()
    if existing is not None:
        return existing
    now = timezone.now()
    affected = (
        MemoryRecord.objects.filter(consent_ref=consent_ref)
        .exclude(status=RecordStatus.EXPIRED)
        .not_held()
    )
    affected_pks = list(affected.values_list("pk", flat=True))
    count = affected.update(status=RecordStatus.EXPIRED, expires_at=now)
    # A replayed write must not hand back what the consent no longer covers.
    purge_responses_about(_ids_about(affected_pks))
    # Expired sources take their derived artifacts with them now, not at compaction.
    derived = deletion_propagate(record_ids=affected_pks, reason="source consent revoked")
    revocation = ConsentRevocation.objects.create(
        tenant=tenant,
        consent_ref=consent_ref,
        revoked_at=now,
        revoked_by_label=actor.label[:200],
        reason=reason,
        records_expired=count,
    )
    event = audit_record(
        tenant=tenant,
        actor=actor,
        action="consent.revoke",
        object_type="consent",
        object_id=str(revocation.pk),
        digest=content_digest({"consent_ref": consent_ref}),
        data={
            "records_expired": count,
            "reason": reason,
            "target": {"consent_ref": consent_ref},
        },
    )
    derived.stamp(event.pk)
    return revocation


class Held(RecordError):
    """A legal hold keeps the record; it cannot be deleted or expire until the hold is lifted."""

    status = 409


@dataclass
class DeletionResult:
    receipt: Any
    record_ids: list[str]


def fact_is_held(fact: Fact) -> bool:
    from .models import LegalHold

    return LegalHold.objects.active().covering(subject=fact.subject, fact=fact).exists()


LOCK_FACT_FOR_DELETE_SQL = (
    "SELECT id, tenant_id, subject, key FROM records_fact WHERE id = %s FOR UPDATE"
)


def record_delete(
    *, record: MemoryRecord, actor: Actor, reason: str, kind: str = "record", parent: Any = None
) -> DeletionResult:
    """Delete a fact: every version of it, its observations, promotion history and conflicts,
    and stored API responses describing them, in one transaction; leave a receipt with ids
    and a digest, never the content."""
    if not connection.in_atomic_block:
        with transaction.atomic():
            return record_delete(
                record=record, actor=actor, reason=reason, kind=kind, parent=parent
            )
    # Lock and hold check change nothing, so a refusal (Held) leaves the caller's transaction
    # usable; from there on nothing is caught, and no savepoint is needed. Every statement
    # here is on the hot path of deletion (its target in docs/performance.md).
    with connection.cursor() as cursor:
        cursor.execute(LOCK_FACT_FOR_DELETE_SQL, [record.fact_id])
        row = cursor.fetchone()
        if row is None:
            raise Fact.DoesNotExist("No such fact in this tenant.")
        fact = _loaded(Fact, id=row[0], tenant_id=row[1], subject=row[2], key=row[3])
    # After the fact's lock (a new statement, a new snapshot): a hold placed on the fact
    # meanwhile holds a key-share lock on it until it commits, so it is seen here. Every
    # version of the fact, locked, with whether an active legal hold covers it.
    versions = list(
        MemoryRecord.objects.filter(fact_id=fact.pk)
        .annotate(held=record_held())
        .only("id", "fact_id", "subject", "key", "value", "content", "written_at")
        .order_by("version")
        .select_for_update(of=("self",))
    )
    if any(version.held for version in versions):  # type: ignore[attr-defined]
        raise Held("A legal hold keeps this record; lift the hold before deleting it.")
    for version in versions:
        version.fact = fact
    with transaction.atomic(savepoint=False):
        return _versions_delete(
            fact=fact,
            versions=versions,
            whole_fact=True,
            actor=actor,
            reason=reason,
            kind=kind,
            parent=parent,
            audited_record=record,
        )


def _conflicts_about(record_pks: list[Any]) -> QuerySet[Conflict]:
    return Conflict.objects.filter(
        Q(current_record_id__in=record_pks) | Q(contender_id__in=record_pks)
    )


def _ids_about(record_pks: list[Any]) -> list[str]:
    """The records' ids and those of their promotion requests and conflicts: every object a
    stored API response about them may describe (see :mod:`apps.api.idempotency`)."""
    requests = PromotionRequest.objects.filter(record_id__in=record_pks)
    return (
        [str(pk) for pk in record_pks]
        + [str(pk) for pk in requests.values_list("pk", flat=True)]
        + [str(pk) for pk in _conflicts_about(record_pks).values_list("pk", flat=True)]
    )


def _versions_delete(
    *,
    fact: Fact,
    versions: list[MemoryRecord],
    whole_fact: bool,
    actor: Actor,
    reason: str,
    kind: str,
    parent: Any,
    audited_record: MemoryRecord,
) -> DeletionResult:
    """Delete ``versions`` (locked) of the locked ``fact`` (the fact itself with
    ``whole_fact``), with what hangs off them: observations, promotion requests and events,
    the conflicts they take part in, embeddings, citing summaries (invalidated), queued work
    and stored responses about any of these, in one statement
    (:func:`apps.derivations.purge.versions_purge`). Receipt and audit keep ids, counts and a
    digest."""
    from apps.audit.models import DeletionReceipt
    from apps.audit.services import subject_digest
    from apps.derivations.purge import versions_purge

    pks = [v.pk for v in versions]
    record_ids = [str(pk) for pk in pks]
    digest = content_digest([record_digest(v) for v in versions])
    now = timezone.now()
    purge = versions_purge(
        record_ids=pks,
        fact_ids=[fact.pk] if whole_fact else [],
        reason=f"source {kind}: {reason}",
        now=now,
    )
    counts = purge.counts
    receipt = DeletionReceipt(
        tenant_id=fact.tenant_id,
        kind=kind,
        requested_by_type=actor.type,
        requested_by_id=actor.id,
        requested_by_label=actor.label[:200],
        reason=reason,
        deleted_at=now,
        fact_id=fact.pk,
        record_ids=record_ids,
        counts=counts,
        content_digest=digest,
        subject_digest=subject_digest(fact.subject),
        written_from=min(v.written_at for v in versions),
        parent=parent,
    )
    event = audit_event(
        tenant=fact.tenant_id,
        actor=actor,
        action="record.delete",
        object_type="record",
        object_id=str(audited_record.pk),
        digest=digest,
        data={
            "receipt": str(receipt.pk),
            "records": record_ids,
            "counts": counts,
            "kind": kind,
            "reason": reason,
            "target": {"fact": str(fact.pk), "subject": fact.subject, "key": fact.key},
        },
    )
    receipt.save(force_insert=True)
    # The event, and the invalidated summaries naming the event: one statement.
    audit_append(event, alongside=purge.stamp(event.pk))
    return DeletionResult(receipt=receipt, record_ids=record_ids)


@transaction.atomic
def records_compact_expired(*, limit: int = 1000) -> int:
    """Delete the current tenant's expired versions through the deletion path, leaving a
    receipt of kind ``expiry`` per fact. A fact whose every version expired goes as a whole;
    otherwise only its expired versions go (a superseded version past its lifetime, or an
    expired current one while a contender still lives). Legal holds keep everything they
    cover. Returns how many facts were compacted."""
    now = timezone.now()
    actor = Actor.system("retention")
    expired = MemoryRecord.objects.expired(now).not_held()
    fact_ids = list(expired.order_by("fact_id").values_list("fact_id", flat=True).distinct())
    compacted = 0
    for fact in Fact.objects.select_for_update().filter(pk__in=fact_ids[:limit]).order_by("pk"):
        # Re-read under the fact's lock: a write or a hold may have come in meanwhile.
        versions = list(
            expired.filter(fact=fact).select_for_update(of=("self",)).order_by("version")
        )
        if not versions:
            continue
        whole = (
            not MemoryRecord.objects.filter(fact=fact)
            .exclude(pk__in=[v.pk for v in versions])
            .exists()
        )
        _versions_delete(
            fact=fact,
            versions=versions,
            whole_fact=whole,
            actor=actor,
            reason="expired",
            kind="expiry",
            parent=None,
            audited_record=versions[0],
        )
        compacted += 1
    return compacted


@transaction.atomic
def legal_hold_place(
    *, tenant: Tenant, actor: Actor, reason: str, subject: str = "", fact: Fact | None = None
) -> Any:
    from .models import LegalHold

    if not reason.strip():
        raise RecordError("A legal hold needs a reason.", status=400, field="reason")
    if not subject and fact is None:
        raise RecordError("A legal hold needs a subject or a record.", status=400)
    hold = LegalHold.objects.create(
        tenant=tenant,
        subject=subject,
        fact=fact,
        reason=reason,
        placed_by_label=actor.label[:200],
        placed_at=timezone.now(),
    )
    audit_record(
        tenant=tenant,
        actor=actor,
        action="legal_hold.place",
        object_type="legal_hold",
        object_id=str(hold.pk),
        data={
            "fact": str(fact.pk) if fact else None,
            "on_subject": bool(subject),
            "reason": reason,
            "target": _hold_target(hold),
        },
    )
    return hold


def _hold_target(hold: Any) -> dict[str, str | None]:
    return {"subject": hold.subject or None, "fact": str(hold.fact_id) if hold.fact_id else None}


@transaction.atomic
def legal_hold_lift(*, hold: Any, actor: Actor, reason: str) -> Any:
    """Lift a hold, for a non-empty ``reason``: its facts follow their retention again.
    Lifting a lifted hold changes nothing."""
    if not isinstance(reason, str) or not reason.strip():
        raise RecordError("Lifting a legal hold needs a reason.", status=400, field="reason")
    if hold.lifted_at is None:
        hold.lifted_at = timezone.now()
        hold.lifted_by_label = actor.label[:200]
        hold.save(update_fields=["lifted_at", "lifted_by_label"])
        audit_record(
            tenant=hold.tenant_id,
            actor=actor,
            action="legal_hold.lift",
            object_type="legal_hold",
            object_id=str(hold.pk),
            data={"reason": reason, "target": _hold_target(hold)},
        )
    return hold


@dataclass(frozen=True)
class RetentionChange:
    """What setting a class's rule does to the records already written: ``expired`` live
    versions end now (legal holds keep theirs), ``shortened`` others will end sooner."""

    sensitivity: str
    previous: Limits
    provisional_max: timedelta
    confirmed_max: timedelta | None
    expired: int
    shortened: int
    applied: bool
    rule: Any = None

    @property
    def affects_existing(self) -> bool:
        return bool(self.expired or self.shortened)


def _days(value: timedelta | None) -> float | None:
    return value.total_seconds() / 86400 if value is not None else None


@transaction.atomic
def retention_rule_set(
    *,
    tenant: Tenant,
    sensitivity: str,
    provisional_max: timedelta,
    confirmed_max: timedelta | None,
    actor: Actor,
    reason: str = "",
    dry_run: bool = False,
) -> RetentionChange:
    """Set the longest lifetimes of one sensitivity class, for new writes and promotions and
    for the class's live records: each one's expiry becomes the earlier of its own and
    ``written_at`` plus the new limit of its trust (never later than it was). Versions that
    this ends now expire as any expiry does: their derived summaries are invalidated and
    their embeddings removed, in this transaction.

    A change that ends or shortens existing records needs a ``reason``. ``dry_run`` counts
    what the change would do and changes nothing. One audit event holds the old and new
    rule, the counts and the reason."""
    from apps.api.idempotency import purge_responses_about
    from apps.derivations.propagation import deletion_propagate

    from .models import RetentionRule, Sensitivity
    from .retention import class_limits, records_shortened_by

    errors: dict[str, list[str]] = {}
    if sensitivity not in Sensitivity.values:
        errors["sensitivity"] = [f"One of: {', '.join(Sensitivity.values)}."]
    if provisional_max <= timedelta(0):
        errors["provisional_max"] = ["Must be longer than zero."]
    if confirmed_max is not None and confirmed_max < provisional_max:
        errors["confirmed_max"] = ["Confirmed records may not expire before provisional ones."]
    if errors:
        raise ValidationError(errors)
    now = timezone.now()
    # Two changes of one class queue here; the second counts what the first left.
    list(RetentionRule.objects.select_for_update().filter(sensitivity=sensitivity))
    previous = class_limits(sensitivity)
    shortened = records_shortened_by(
        sensitivity=sensitivity,
        provisional_max=provisional_max,
        confirmed_max=confirmed_max,
        now=now,
    )
    ending_now = shortened.filter(Q(shortened_expires_at__lte=now)).not_held()
    if dry_run:
        expired_count = ending_now.count()
        return RetentionChange(
            sensitivity=sensitivity,
            previous=previous,
            provisional_max=provisional_max,
            confirmed_max=confirmed_max,
            expired=expired_count,
            shortened=shortened.count() - expired_count,
            applied=False,
        )
    # Lock what changes, then decide on the locked rows (a write's promotion waits here and
    # reads the new rule after commit).
    shortened_pks = list(shortened.select_for_update(of=("self",)).values_list("pk", flat=True))
    expired_pks = list(ending_now.filter(pk__in=shortened_pks).values_list("pk", flat=True))
    if shortened_pks and not reason.strip():
        raise ValidationError(
            {"reason": ["Say why: this change shortens the lifetime of existing records."]}
        )
    # Only earlier expiries were selected, so the new limit is each one's minimum.
    for trust, limit in ((Trust.PROVISIONAL, provisional_max), (Trust.CONFIRMED, confirmed_max)):
        if limit is not None:
            MemoryRecord.objects.filter(pk__in=shortened_pks, trust=trust).update(
                expires_at=F("written_at") + limit
            )
    # Expired now, like a revoked consent's records: nothing may replay or cite them.
    purge_responses_about(_ids_about(expired_pks))
    derived = deletion_propagate(
        record_ids=expired_pks, reason="source expired: retention rule shortened"
    )
    rule, _ = RetentionRule.objects.update_or_create(
        sensitivity=sensitivity,
        defaults={
            "tenant": tenant,
            "provisional_max": provisional_max,
            "confirmed_max": confirmed_max,
        },
    )
    event = audit_record(
        tenant=tenant,
        actor=actor,
        action="retention.set",
        object_type="retention_rule",
        object_id=str(rule.pk),
        data={
            "sensitivity": sensitivity,
            "provisional_max_days": _days(provisional_max),
            "confirmed_max_days": _days(confirmed_max),
            "previous": {
                "provisional_max_days": _days(previous[0]),
                "confirmed_max_days": _days(previous[1]),
            },
            "records_expired": len(expired_pks),
            "records_shortened": len(shortened_pks) - len(expired_pks),
            "reason": reason,
        },
    )
    derived.stamp(event.pk)
    return RetentionChange(
        sensitivity=sensitivity,
        previous=previous,
        provisional_max=provisional_max,
        confirmed_max=confirmed_max,
        expired=len(expired_pks),
        shortened=len(shortened_pks) - len(expired_pks),
        applied=True,
        rule=rule,
    )


# --- reversing a decision -------------------------------------------------------------------


def _reopen(request: PromotionRequest) -> None:
    request.state = PromotionState.OPEN
    request.decided_by_type = request.decided_by_id = request.decided_by_label = ""
    request.decided_at = None
    request.decision_reason = ""
    request.save()


def _lock_decided_request(request: PromotionRequest, state: str) -> PromotionRequest:
    locked = (
        PromotionRequest.objects.select_for_update().select_related("record").get(pk=request.pk)
    )
    if locked.state != state:
        raise RecordError(
            f"The promotion request is {locked.state}, not {state}.", status=409, state=locked.state
        )
    return locked


@transaction.atomic
def promotion_return_to_provisional(
    *, request: PromotionRequest, actor: Actor, reason: str
) -> PromotionRequest:
    """Reverse a mistaken approval: the record is provisional again, on its provisional clock
    (counted from when it was written, as if never confirmed), and the request is open again
    for a fresh decision. The approval stays in the audit chain; the reversal is one more
    event there, with its reason.

    Refused when the record's provisional lifetime has already ended (returning it would
    delete it at the next compaction, which is what deletion is for) or the record is no
    longer the active version."""
    if not reason.strip():
        raise RecordError("Say why the approval is reversed.", status=400, field="reason")
    request = _lock_decided_request(request, PromotionState.APPROVED)
    record = _lock_record(request.record)
    if record.status != RecordStatus.ACTIVE:
        raise RecordError(f"A {record.status} record cannot be returned.", status=409)
    now = timezone.now()
    if record.trust == Trust.CONFIRMED:
        life = lifetime(
            sensitivity=record.sensitivity,
            trust=Trust.PROVISIONAL,
            ttl=record.ttl_requested,
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
    _reopen(request)
    audit_record(
        tenant=record.tenant_id,
        actor=actor,
        action="promotion.return_to_provisional",
        object_type="promotion_request",
        object_id=str(request.pk),
        data={"record": str(record.pk), "reason": reason, "target": _record_target(record)},
        lane_key=str(record.fact_id),
    )
    return request


@transaction.atomic
def promotion_reopen(*, request: PromotionRequest, actor: Actor, reason: str) -> PromotionRequest:
    """Reverse a rejection: the request is open again (its record was never changed by the
    rejection). The rejection stays in the audit chain; the reopening is one more event."""
    if not reason.strip():
        raise RecordError("Say why the rejection is reversed.", status=400, field="reason")
    request = _lock_decided_request(request, PromotionState.REJECTED)
    _reopen(request)
    audit_record(
        tenant=request.tenant_id,
        actor=actor,
        action="promotion.reopen",
        object_type="promotion_request",
        object_id=str(request.pk),
        data={
            "record": str(request.record_id),
            "reason": reason,
            "target": _record_target(request.record),
        },
        lane_key=str(request.record.fact_id),
    )
    return request
