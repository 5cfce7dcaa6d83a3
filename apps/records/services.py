"""Changes to memory records: the write path, observations, promotion, conflicts, consent.

Every service runs in one transaction, locks the fact it changes (so concurrent writes to one
fact serialise and writes to different facts do not), and appends to the audit chain. Audit
events carry ids, counts and digests, never memory content.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from django.db import connection, transaction
from django.db.models import DateTimeField, F, Model, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from apps.audit.services import (
    audit_append,
    audit_event,
    audit_record,
    content_digest,
)
from apps.core import deletion
from apps.core.actors import Actor
from apps.core.errors import DomainError
from apps.core.validation import json_equal
from apps.tenancy.context import prepared_cursor
from apps.tenancy.models import Tenant
from apps.work.outbox import record_embedding_enqueue, record_embedding_message
from apps.work.queued import work_planned

from . import signals
from .models import (
    DEFAULT_RETENTION,
    SENSITIVITY_ORDER,
    Conflict,
    ConflictState,
    ConsentRevocation,
    Fact,
    Lifetime,
    Limits,
    MemoryRecord,
    Observation,
    PromotionEvent,
    PromotionRequest,
    PromotionState,
    RecordStatus,
    RetentionBasis,
    Scope,
    Trust,
    lifetime,
    lifetime_ended,
    scope_canonical,
)
from .selectors import records_live
from .validation import (
    RUN_ID_RE,
    RecordInput,
    WriteRejected,
)

M = TypeVar("M", bound=Model)


class RecordError(DomainError):
    """A rule of the records refused the change (409 unless it names another status)."""


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
    # Refused rather than stored already expired: nothing could read it, and a dead version
    # would still open a conflict or take its fact's version number.
    ended = lifetime_ended(
        sensitivity=data.sensitivity, ttl=data.ttl, observed_at=data.observed_at, now=now
    )
    if ended:
        raise WriteRejected(ended, status=422)
    # No savepoint: nothing below is caught and recovered from inside a caller's transaction,
    # and a write is the hottest path (two fewer round trips). A refusal found inside is
    # raised after the block, which then has written nothing.
    with transaction.atomic(savepoint=False):
        refusal = session_run_refusal(tenant=tenant, data=data)
        if refusal is None:
            return _record_write(tenant, actor, data, now)
    raise refusal


def derived_class_raise(record_id: uuid.UUID, sensitivity: str) -> int:
    """Raise what was derived from the version ``record_id`` (summaries citing it) to
    ``sensitivity`` where it is lower; how many artifacts (``signals.derived_class_raise``)."""
    return sum(signals.derived_class_raise.results(record_id=record_id, sensitivity=sensitivity))


def deletion_propagate(*, record_ids: list[Any], reason: str) -> deletion.Outcome:
    """Withdraw the versions ``record_ids`` (expired, still stored) inside the caller's
    transaction: what the deletion definition derives from them goes now (embeddings deleted,
    citing summaries invalidated, queued work and stored responses forgotten), the versions
    stay until compaction (the models' ``deletion_rules`` say what goes)."""
    # Lock the versions first: a summary being written about one of them (it locks its
    # sources) commits before the deletion's queries run, so they see it and invalidate it.
    list(MemoryRecord.objects.select_for_update().filter(pk__in=record_ids).values_list("pk"))
    return deletion.run(withdrawn={MemoryRecord: record_ids}, now=timezone.now(), reason=reason)


def session_run_refusal(*, tenant: Tenant, data: RecordInput) -> WriteRejected | None:
    """Why a ``session``-retained write may not name ``source.run_id`` (None when it may):
    400 for what is not a run id at all, 422 for an id that names no open run of ``tenant``.

    The run must be an open run of ``tenant``: the record ends with it. An unknown id, a
    closed run and another tenant's run get the same answer, so the refusal reveals nothing
    about other tenants. The run stays locked until the write commits (a close locks it
    too), so the close that expires the run's session records cannot miss this one.
    """

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
    if not any(signals.session_run_open.results(tenant=tenant, run_id=run_id)):
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
        observed_at=data.observed_at,
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
        **actor.fields("writer"),
    )
    # The version, its first observation, the fact's pointers, the embedding work (the
    # outbox row the worker embeds from after commit; none where the tenant's model embeds
    # at write, below) and the audit event, each through the ORM. (One statement for all of
    # them measured under 1.5x of this on the request: docs/performance.md.)
    record.save(force_insert=True)
    _observation(tenant, record, data, actor, now).save(force_insert=True)
    conflict = None
    if current is None:
        fact.current_id = record.pk
        outcome = "created"
    else:
        conflict = Conflict(
            tenant=tenant, fact=fact, current_record=current, contender=record, opened_at=now
        )
        conflict.save(force_insert=True)
        outcome = "conflict"
    Fact.objects.filter(pk=fact.pk).update(
        current_id=fact.current_id, last_version=fact.last_version
    )
    embedding = work_planned(
        signals.embed_record,
        record,
        row=record_embedding_message,
        enqueue=record_embedding_enqueue,
    )
    for row in embedding.rows:
        row.save(force_insert=True)
    # A fact's changes spread over the lanes by fact (the rest of a transaction's events
    # follow its first onto one lane: apps.audit.services).
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
        prepared=True,
    )
    record.fact = fact
    embedding.stored(record)  # where the model embeds at write: now, in this transaction
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
    """An observation of ``record`` by this write, unsaved."""
    return Observation(
        tenant=tenant,
        record=record,
        **_source_fields(data),
        observed_at=data.observed_at,
        recorded_at=now,
        reason=data.reason,
        **actor.fields("writer"),
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
    held, observed = sensitivity_rank(record.sensitivity), sensitivity_rank(data.sensitivity)
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
        observed_at=record.observed_at,
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
    summaries = derived_class_raise(record.pk, data.sensitivity)
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
    # A tenant that reserves promotions to a person gets a request for review instead.
    if tenant.auto_promote_on_second_observation and not tenant.promotion_requires_person:
        record_confirm(
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
            **actor.fields("requested_by"),
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


def record_confirm(
    tenant: Tenant,
    record: MemoryRecord,
    actor: Actor,
    evidence: dict[str, Any],
    request: PromotionRequest | None,
    now: datetime,
) -> PromotionEvent:
    """Confirm ``record`` (locked by the caller): its lifetime becomes a confirmed one's, a
    promotion event records why, and the audit log who."""
    life = lifetime(
        sensitivity=record.sensitivity,
        trust=Trust.CONFIRMED,
        ttl=record.ttl_requested,
        observed_at=record.observed_at,
        written_at=record.written_at,
    )
    record.trust = Trust.CONFIRMED
    record.expires_at = life.expires_at
    record.save(update_fields=["trust", "expires_at"])
    event = PromotionEvent.objects.create(
        tenant=tenant,
        record=record,
        request=request,
        **actor.fields("promoted_by"),
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
        lane_key=str(record.fact_id),
    )
    return event


def sensitivity_rank(value: str) -> int:
    return SENSITIVITY_ORDER.index(value)
