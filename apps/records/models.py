"""Durable facts: versioned records, the observations behind them, conflicts, promotion,
retention rules and the lifetime they give a record, legal holds and consent revocations.

A *fact* is ``(tenant, subject, key, scope)``: a :class:`Scope` (domain, task type and the
conditions a value was observed under) is part of what a fact means, so the same key observed
in two scopes is two facts that never conflict with, supersede or corroborate one another.
Each value a fact has held is a :class:`MemoryRecord` row (a version). :class:`Fact` is the
head of that chain: it names the current version and is the row a write locks, so concurrent
writes to one fact are serialised while writes to different facts run in parallel.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, ClassVar

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVectorField
from django.db import models
from django.db.models.functions import Least
from django.utils import timezone

from apps.api.models import STORED_RESPONSE
from apps.core import deletion
from apps.tenancy.models import TenantOwned
from apps.work.models import QUEUED_WORK


class SourceKind(models.TextChoices):
    INTERACTION = "interaction"
    TOOL_CALL = "tool_call"
    DOCUMENT = "document"
    USER_ACTION = "user_action"
    DERIVED = "derived"


class Sensitivity(models.TextChoices):
    PUBLIC = "public"
    INTERNAL = "internal"
    PERSONAL = "personal"
    RESTRICTED = "restricted"


SENSITIVITY_ORDER: tuple[str, ...] = ("public", "internal", "personal", "restricted")


class RetentionBasis(models.TextChoices):
    SESSION = "session"
    CONSENT = "consent"
    CONTRACT = "contract"
    INDEFINITE = "indefinite"


class RedactionState(models.TextChoices):
    NONE = "none"
    APPLIED = "applied"
    REQUIRED = "required"


class Trust(models.TextChoices):
    PROVISIONAL = "provisional"
    CONFIRMED = "confirmed"


class RecordStatus(models.TextChoices):
    ACTIVE = "active"
    SUPERSEDED = "superseded"
    EXPIRED = "expired"
    REDACTED = "redacted"


def version_pointer(to: Any) -> models.ForeignKey[Any, Any]:
    """A pointer between versions (a fact's current one, supersedes, superseded_by, a
    conflict's resolved record): unlinked when its target is deleted (the deletion definition,
    :mod:`apps.core.deletion`, reads its ``SET_NULL`` and clears it in the statement that
    deletes the target), and checked by the database at commit like every other foreign key
    (docs/performance.md measures what the checks cost an erasure)."""
    return models.ForeignKey(
        to,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )


def scope_canonical(domain: str, task_type: str, conditions: dict[str, Any]) -> str:
    """The canonical form of a scope, its identity within a tenant: conditions that mean the
    same JSON (members in any order, ``1`` and ``1.0``) give the same form, as they match the
    same searches (jsonb containment compares by meaning too)."""

    def normal(value: Any) -> Any:
        if isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, dict):
            return {member: normal(item) for member, item in value.items()}
        if isinstance(value, list):
            return [normal(item) for item in value]
        return value

    return json.dumps(
        [domain, task_type, normal(conditions)],
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )


class Scope(TenantOwned):
    """Where a fact holds: a domain, a task type and the conditions it was observed under.

    One row per tenant and canonical form (:func:`scope_canonical`), created by the first
    write that names it. Rows are never changed: a fact's scope is part of its identity."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    domain = models.CharField(max_length=100)
    task_type = models.CharField(max_length=100, blank=True)
    conditions = models.JSONField(default=dict, blank=True)
    canonical = models.TextField(editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints: ClassVar[list[models.BaseConstraint]] = [
            models.UniqueConstraint(fields=["tenant", "canonical"], name="scope_identity")
        ]
        indexes: ClassVar[list[models.Index]] = [
            models.Index(fields=["tenant", "domain", "task_type"], name="scope_tenant_domain")
        ]

    def __str__(self) -> str:
        where = f"{self.domain}/{self.task_type}" if self.task_type else self.domain
        return (
            f"{where} {json.dumps(self.conditions, sort_keys=True)}" if self.conditions else where
        )

    def as_dict(self) -> dict[str, Any]:
        return {"domain": self.domain, "task_type": self.task_type, "conditions": self.conditions}


class Fact(TenantOwned):
    """The identity of a fact, ``(tenant, subject, key, scope)``, and a pointer to its
    current version (the write lock)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    subject = models.CharField(max_length=200)
    key = models.CharField(max_length=200)
    scope = models.ForeignKey(Scope, on_delete=models.PROTECT, related_name="facts")
    current = version_pointer("MemoryRecord")
    last_version = models.IntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    deletion_rules = deletion.Rules(subject_data=True)

    class Meta:
        constraints: ClassVar[list[models.BaseConstraint]] = [
            models.UniqueConstraint(
                fields=["tenant", "subject", "key", "scope"], name="fact_identity"
            )
        ]

    def __str__(self) -> str:
        return f"{self.subject} {self.key}"


class LegalHoldQuerySet(models.QuerySet["LegalHold"]):
    """Legal holds, by the questions asked of them: in force (now, or at a moment), and
    covering a fact (a hold names a subject, whose every fact it keeps, or one fact)."""

    def active(self) -> LegalHoldQuerySet:
        """Not lifted."""
        return self.filter(lifted_at__isnull=True)

    def lifted(self) -> LegalHoldQuerySet:
        return self.filter(lifted_at__isnull=False)

    def in_force_at(self, moment: datetime) -> LegalHoldQuerySet:
        """Placed by ``moment`` and not lifted by then."""
        return self.filter(placed_at__lte=moment).filter(
            models.Q(lifted_at__isnull=True) | models.Q(lifted_at__gt=moment)
        )

    def covering(self, *, subject: Any, fact: Any) -> LegalHoldQuerySet:
        """Holds on ``subject`` or on ``fact`` (values, a fact, or expressions such as
        ``OuterRef``)."""
        return self.filter(models.Q(subject=subject) | models.Q(fact=fact))

    def covering_record(self) -> LegalHoldQuerySet:
        """Holds covering the outer query's record (for ``Exists``)."""
        return self.covering(subject=models.OuterRef("subject"), fact=models.OuterRef("fact_id"))


class ConsentRevocationQuerySet(models.QuerySet["ConsentRevocation"]):
    def revoking_record(self) -> ConsentRevocationQuerySet:
        """The revocation of the consent the outer query's record was written under (for
        ``Exists``, beside the record's own test that it names one)."""
        return self.filter(consent_ref=models.OuterRef("consent_ref"))


def record_held() -> models.Exists:
    """An active legal hold covers the outer query's record."""
    return models.Exists(LegalHold.objects.active().covering_record())


def record_consent_revoked() -> models.Q:
    """The outer query's record was written under a consent that has since been revoked.
    (The record's own test first: most records name no consent, and need no lookup.)"""
    return ~models.Q(consent_ref="") & models.Q(
        models.Exists(ConsentRevocation.objects.revoking_record())
    )


def record_expired_q(now: datetime) -> models.Q:
    """Past its lifetime, expired by status, or written under a revoked consent (whether or
    not a hold keeps it).

    The consent test is part of the predicate, not only of the revocation's bulk update:
    a record a legal hold kept at revocation time, or one written concurrently with it,
    expires as soon as nothing holds it.
    """
    return (
        models.Q(expires_at__lte=now)
        | models.Q(status=RecordStatus.EXPIRED)
        | record_consent_revoked()
    )


def record_live_q(now: datetime) -> models.Q:
    """Not expired, unless a legal hold keeps it: the one definition of "live"."""
    not_expired = (
        (models.Q(expires_at__isnull=True) | models.Q(expires_at__gt=now))
        & ~models.Q(status=RecordStatus.EXPIRED)
        & ~record_consent_revoked()
    )
    return not_expired | models.Q(record_held())


# The statuses of a version that can be its fact's value (a current version is one of them).
CURRENT_STATUSES = ("active", "redacted")


class MemoryRecordQuerySet(models.QuerySet["MemoryRecord"]):
    def live(self, now: datetime | None = None) -> MemoryRecordQuerySet:
        """Not expired at ``now`` (default: now), unless a legal hold keeps it. Every
        record selector applies it, so an expired record is never returned even before the
        compaction sweep runs."""
        return self.filter(record_live_q(now or timezone.now()))

    def expired(self, now: datetime | None = None) -> MemoryRecordQuerySet:
        """Past their lifetime at ``now`` (see :func:`record_expired_q`), held or not."""
        return self.filter(record_expired_q(now or timezone.now()))

    def held(self) -> MemoryRecordQuerySet:
        """Covered by an active legal hold."""
        return self.filter(record_held())

    def not_held(self) -> MemoryRecordQuerySet:
        return self.exclude(record_held())

    def visible(self, *, sees_restricted: bool) -> MemoryRecordQuerySet:
        """What the reader may see: ``restricted`` records only for a person holding
        ``view_restricted`` or a credential with ``sees_restricted`` (every credential unless
        issued without). Every read a person or an agent makes (lists, a record by id,
        history, facts, checks) applies it, so a hidden record reads as missing, like another
        tenant's."""
        if sees_restricted:
            return self
        return self.exclude(sensitivity=Sensitivity.RESTRICTED)

    def current(self) -> MemoryRecordQuerySet:
        """Each fact's value now: its current version, active or redacted. Other live
        versions are superseded ones and the contenders of open conflicts."""
        return self.filter(is_current=True, status__in=CURRENT_STATUSES)

    def held_at(self, moment: datetime) -> MemoryRecordQuerySet:
        """The versions the memory held at ``moment`` (system time): each fact's current
        version then, not expired then (or kept by a legal hold in force then). What was
        deleted since is gone; what has expired since but is still stored is included, so
        the same ``moment`` reads the same answer however late it is asked."""
        hold_then = models.Exists(LegalHold.objects.in_force_at(moment).covering_record())
        consent_revoked_then = ~models.Q(consent_ref="") & models.Q(
            models.Exists(
                ConsentRevocation.objects.revoking_record().filter(revoked_at__lte=moment)
            )
        )
        not_expired_then = (
            models.Q(expires_at__isnull=True) | models.Q(expires_at__gt=moment)
        ) & ~consent_revoked_then
        return self.filter(
            models.Q(written_at__lte=moment, current_from__lte=moment)
            & (models.Q(current_until__isnull=True) | models.Q(current_until__gt=moment))
            & (not_expired_then | models.Q(hold_then))
        )


class MemoryRecord(TenantOwned):
    """One version of a fact, with everything needed to defend it later.

    ``writer_*`` is stamped by the server from the credential or person that wrote it; it is
    never read from a request body.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    fact = models.ForeignKey(Fact, on_delete=models.CASCADE, related_name="versions")
    subject = models.CharField(max_length=200)
    key = models.CharField(max_length=200)
    version = models.IntegerField()
    value = models.JSONField()
    content = models.TextField()
    # The key's words and the content, folded and split into whole words by the database's
    # ``search_document`` (migration 0010 says how, and why not one language's stemmer);
    # retrieval matches a query's stems against it as prefixes and ranks by BM25.
    search = models.GeneratedField(
        expression=models.Func(
            models.F("key"),
            models.F("content"),
            function="search_document",
            output_field=SearchVectorField(),
        ),
        output_field=SearchVectorField(),
        db_persist=True,
    )

    source_kind = models.CharField(max_length=16, choices=SourceKind.choices)
    source_ref = models.CharField(max_length=300)
    source_turn_id = models.CharField(max_length=200, blank=True)
    source_tool_call_id = models.CharField(max_length=200, blank=True)
    source_run_id = models.CharField(max_length=200, blank=True)

    writer_type = models.CharField(max_length=16)
    writer_id = models.CharField(max_length=64)
    writer_label = models.CharField(max_length=200)

    observed_at = models.DateTimeField()
    written_at = models.DateTimeField()
    owner = models.CharField(max_length=200)
    reason = models.TextField()

    scope_domain = models.CharField(max_length=100)
    scope_task_type = models.CharField(max_length=100, blank=True)
    scope_conditions = models.JSONField(default=dict, blank=True)

    sensitivity = models.CharField(max_length=16, choices=Sensitivity.choices)
    retention_basis = models.CharField(max_length=16, choices=RetentionBasis.choices)
    consent_ref = models.CharField(max_length=200, blank=True)
    ttl_requested = models.DurationField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)

    redaction_state = models.CharField(
        max_length=16, choices=RedactionState.choices, default=RedactionState.NONE
    )
    redaction_fields = ArrayField(models.CharField(max_length=200), default=list, blank=True)

    trust = models.CharField(max_length=16, choices=Trust.choices, default=Trust.PROVISIONAL)
    status = models.CharField(
        max_length=16, choices=RecordStatus.choices, default=RecordStatus.ACTIVE
    )
    supersedes = version_pointer("self")
    superseded_by = version_pointer("self")
    superseded_at = models.DateTimeField(null=True, blank=True)
    # System time during which this version was the fact's current value (for as_of reads).
    current_from = models.DateTimeField(null=True, blank=True)
    current_until = models.DateTimeField(null=True, blank=True)
    # Denormalised from Fact.current so retrieval filters on a plain column (good planner
    # estimates); kept in step by every service that moves the current pointer.
    is_current = models.BooleanField(default=False)

    objects = MemoryRecordQuerySet.as_manager()

    deletion_rules = deletion.Rules(
        named_by=(STORED_RESPONSE, QUEUED_WORK),
        subject_data=True,
        counted_as="versions",
        unrelated={
            "source_turn_id": "a turn of the agent's conversation, outside this database",
            "source_tool_call_id": "a tool call of the agent, outside this database",
            "source_run_id": (
                "the run that wrote it, as the agent named it: a run's erasure or close leaves "
                "the records (session ones expire with the close)"
            ),
            "writer_id": "the credential or person that wrote it",
        },
    )

    class Meta:
        constraints: ClassVar[list[models.BaseConstraint]] = [
            models.UniqueConstraint(fields=["fact", "version"], name="record_version_per_fact")
        ]
        indexes: ClassVar[list[models.Index]] = [
            models.Index(fields=["tenant", "subject", "key"], name="record_tenant_subject_key"),
            models.Index(fields=["tenant", "written_at"], name="record_tenant_written"),
            models.Index(fields=["tenant", "expires_at"], name="record_tenant_expires"),
            models.Index(fields=["tenant", "consent_ref"], name="record_tenant_consent"),
            models.Index(fields=["tenant", "owner"], name="record_tenant_owner"),
            # Retrieval's candidates (apps.retrieval.search): the live versions of a scope,
            # with every column the candidate filter reads, so the filter (and the count that
            # chooses the plan) runs on the index alone instead of one heap page per record.
            models.Index(
                fields=["tenant", "scope_domain", "scope_task_type"],
                include=[
                    "id",
                    "status",
                    "expires_at",
                    "consent_ref",
                    "subject",
                    "fact",
                    "trust",
                    "sensitivity",
                    "scope_conditions",
                ],
                condition=models.Q(is_current=True, status__in=list(CURRENT_STATUSES)),
                name="record_tenant_scope_live",
            ),
            # The console's memory browser: newest first under one filter, in index order,
            # so a filter value held by few records does not scan the tenant's table.
            models.Index(fields=["tenant", "key", "written_at"], name="record_tenant_key_written"),
            models.Index(
                fields=["tenant", "scope_domain", "written_at"], name="record_tenant_domain_written"
            ),
            models.Index(
                fields=["tenant", "trust", "written_at"], name="record_tenant_trust_written"
            ),
            models.Index(
                fields=["tenant", "status", "written_at"], name="record_tenant_status_written"
            ),
            models.Index(
                fields=["tenant", "sensitivity", "written_at"],
                name="record_tenant_sens_written",
            ),
            GinIndex(fields=["search"], name="record_search"),
            GinIndex(
                fields=["scope_conditions"], name="record_conditions", opclasses=["jsonb_path_ops"]
            ),
        ]

    def __str__(self) -> str:
        return f"{self.subject} {self.key} v{self.version}"


class Observation(TenantOwned):
    """One time a value was observed: the first write, and every independent confirmation."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    record = models.ForeignKey(MemoryRecord, on_delete=models.CASCADE, related_name="observations")
    source_kind = models.CharField(max_length=16, choices=SourceKind.choices)
    source_ref = models.CharField(max_length=300)
    source_turn_id = models.CharField(max_length=200, blank=True)
    source_tool_call_id = models.CharField(max_length=200, blank=True)
    source_run_id = models.CharField(max_length=200, blank=True)
    observed_at = models.DateTimeField()
    recorded_at = models.DateTimeField()
    writer_type = models.CharField(max_length=16)
    writer_id = models.CharField(max_length=64)
    writer_label = models.CharField(max_length=200)
    reason = models.TextField(blank=True)

    deletion_rules = deletion.Rules(
        counted_as="observations",
        unrelated={
            "source_turn_id": "a turn of the agent's conversation, outside this database",
            "source_tool_call_id": "a tool call of the agent, outside this database",
            "source_run_id": (
                "the run that wrote it, as the agent named it: a run's erasure or close leaves "
                "the records (session ones expire with the close)"
            ),
        },
    )

    class Meta:
        constraints: ClassVar[list[models.BaseConstraint]] = [
            models.UniqueConstraint(fields=["record", "source_ref"], name="observation_source_once")
        ]
        indexes: ClassVar[list[models.Index]] = [
            models.Index(fields=["tenant", "record"], name="observation_tenant_record")
        ]

    def __str__(self) -> str:
        return f"{self.source_ref} at {self.observed_at:%Y-%m-%d}"


class ConflictState(models.TextChoices):
    OPEN = "open"
    RESOLVED = "resolved"


class Resolution(models.TextChoices):
    KEEP_CURRENT = "keep_current"
    ACCEPT_NEW = "accept_new"
    CORRECTED = "corrected"
    # Closed by the system: the two versions were in different scopes, so two facts.
    NOT_A_CONFLICT = "not_a_conflict"


class Conflict(TenantOwned):
    """A write that contradicts the current value. The current value stays current until a
    reviewer resolves it; the loser is superseded, never deleted."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    fact = models.ForeignKey(Fact, on_delete=models.CASCADE, related_name="conflicts")
    current_record = models.ForeignKey(
        MemoryRecord, on_delete=models.CASCADE, related_name="conflicts_as_current"
    )
    contender = models.ForeignKey(
        MemoryRecord, on_delete=models.CASCADE, related_name="conflicts_as_contender"
    )
    state = models.CharField(
        max_length=16, choices=ConflictState.choices, default=ConflictState.OPEN
    )
    opened_at = models.DateTimeField()
    resolution = models.CharField(max_length=16, choices=Resolution.choices, blank=True)
    resolved_record = version_pointer(MemoryRecord)
    resolver_type = models.CharField(max_length=16, blank=True)
    resolver_id = models.CharField(max_length=64, blank=True)
    resolver_label = models.CharField(max_length=200, blank=True)
    reason = models.TextField(blank=True)
    resolved_at = models.DateTimeField(null=True, blank=True)

    # A conflict between versions one of which expires is withdrawn with it: what describes
    # the conflict (a stored response) goes, the conflict stays until compaction deletes it.
    deletion_rules = deletion.Rules(
        named_by=(STORED_RESPONSE,),
        counted_as="conflicts",
        references=(
            deletion.Reference("current_record", deletion.WITHDRAWN),
            deletion.Reference("contender", deletion.WITHDRAWN),
        ),
    )

    class Meta:
        indexes: ClassVar[list[models.Index]] = [
            models.Index(fields=["tenant", "state", "opened_at"], name="conflict_tenant_state")
        ]

    def __str__(self) -> str:
        return f"conflict on {self.fact_id} ({self.state})"


class PromotionState(models.TextChoices):
    OPEN = "open"
    APPROVED = "approved"
    REJECTED = "rejected"


class PromotionRequest(TenantOwned):
    """A request to confirm a provisional record, with its evidence, for review."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    record = models.ForeignKey(
        MemoryRecord, on_delete=models.CASCADE, related_name="promotion_requests"
    )
    evidence = models.JSONField(default=dict, blank=True)
    reason = models.TextField(blank=True)
    requested_by_type = models.CharField(max_length=16)
    requested_by_id = models.CharField(max_length=64, blank=True)
    requested_by_label = models.CharField(max_length=200, blank=True)
    requested_at = models.DateTimeField()
    state = models.CharField(
        max_length=16, choices=PromotionState.choices, default=PromotionState.OPEN
    )
    decided_by_type = models.CharField(max_length=16, blank=True)
    decided_by_id = models.CharField(max_length=64, blank=True)
    decided_by_label = models.CharField(max_length=200, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_reason = models.TextField(blank=True)

    deletion_rules = deletion.Rules(
        named_by=(STORED_RESPONSE,),
        counted_as="promotion_requests",
        references=(deletion.Reference("record", deletion.WITHDRAWN),),
    )

    class Meta:
        indexes: ClassVar[list[models.Index]] = [
            models.Index(fields=["tenant", "state", "requested_at"], name="promotion_tenant_state")
        ]

    def __str__(self) -> str:
        return f"promotion of {self.record_id} ({self.state})"


class PromotionEvent(TenantOwned):
    """The record of a promotion: who or what promoted, on which evidence, when."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    record = models.ForeignKey(
        MemoryRecord, on_delete=models.CASCADE, related_name="promotion_events"
    )
    request = models.ForeignKey(
        PromotionRequest, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    promoted_by_type = models.CharField(max_length=16)
    promoted_by_id = models.CharField(max_length=64, blank=True)
    promoted_by_label = models.CharField(max_length=200, blank=True)
    evidence = models.JSONField(default=dict, blank=True)
    promoted_at = models.DateTimeField()

    deletion_rules = deletion.Rules(counted_as="promotion_events")

    def __str__(self) -> str:
        return f"promotion of {self.record_id} at {self.promoted_at:%Y-%m-%d}"


DEFAULT_RETENTION: dict[str, tuple[timedelta, timedelta | None]] = {
    Sensitivity.RESTRICTED: (timedelta(days=7), timedelta(days=90)),
    Sensitivity.PERSONAL: (timedelta(days=30), timedelta(days=365)),
    Sensitivity.INTERNAL: (timedelta(days=90), timedelta(days=730)),
    Sensitivity.PUBLIC: (timedelta(days=365), None),
}


class RetentionRule(TenantOwned):
    """The longest a record of one sensitivity class may live, provisional and confirmed.

    ``confirmed_max`` empty means no limit. A class without a row uses
    :data:`DEFAULT_RETENTION`.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    sensitivity = models.CharField(max_length=16, choices=Sensitivity.choices)
    provisional_max = models.DurationField()
    confirmed_max = models.DurationField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints: ClassVar[list[models.BaseConstraint]] = [
            models.UniqueConstraint(
                fields=["tenant", "sensitivity"], name="retention_rule_per_class"
            ),
            models.CheckConstraint(
                condition=models.Q(provisional_max__gt=timedelta(0)),
                name="retention_provisional_positive",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.sensitivity}: {self.provisional_max} / {self.confirmed_max or 'none'}"


# A record's lifetime under these rules, computed at its write (the read-time predicate is
# record_expired_q). It counts from when the record was observed (``observed_at``), not from
# when it was written: an observation made in January with a 30-day ttl ends in February,
# however late it reaches the memory. ``observed_at`` may run ahead of the server's clock by
# the allowed skew; the lifetime then counts from the write, so a clock ahead never lengthens
# it.


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
    return Least(
        models.F("observed_at"), models.F("written_at"), output_field=models.DateTimeField()
    )


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
    new_expiry = models.Case(
        *(
            models.When(trust=trust, then=lifetime_start_expression() + models.Value(limit))
            for trust, limit in limits.items()
            if limit is not None
        ),
        default=None,
        output_field=models.DateTimeField(),
    )
    return (
        MemoryRecord.objects.live(now)
        .filter(sensitivity=sensitivity)
        .annotate(shortened_expires_at=new_expiry)
        .filter(shortened_expires_at__isnull=False)
        .filter(
            models.Q(expires_at__isnull=True)
            | models.Q(expires_at__gt=models.F("shortened_expires_at"))
        )
    )


class LegalHold(TenantOwned):
    """Keeps a subject's or a record's facts from expiring or being deleted until lifted."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    subject = models.CharField(max_length=200, blank=True)
    fact = models.ForeignKey(
        Fact, null=True, blank=True, on_delete=models.CASCADE, related_name="holds"
    )
    reason = models.TextField()
    placed_by_label = models.CharField(max_length=200)
    placed_at = models.DateTimeField()
    lifted_at = models.DateTimeField(null=True, blank=True)
    lifted_by_label = models.CharField(max_length=200, blank=True)

    class Meta:
        constraints: ClassVar[list[models.BaseConstraint]] = [
            models.CheckConstraint(
                condition=~models.Q(subject="") | models.Q(fact__isnull=False),
                name="legal_hold_has_target",
            )
        ]
        indexes: ClassVar[list[models.Index]] = [
            models.Index(fields=["tenant", "subject"], name="hold_tenant_subject"),
        ]

    objects = LegalHoldQuerySet.as_manager()

    def __str__(self) -> str:
        return f"hold on {self.subject or self.fact_id}"


class ConsentRevocation(TenantOwned):
    """A revoked consent: everything written under it expired, and new writes citing it are
    refused."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    consent_ref = models.CharField(max_length=200)
    revoked_at = models.DateTimeField()
    revoked_by_label = models.CharField(max_length=200)
    reason = models.TextField(blank=True)
    records_expired = models.IntegerField(default=0)

    class Meta:
        constraints: ClassVar[list[models.BaseConstraint]] = [
            models.UniqueConstraint(fields=["tenant", "consent_ref"], name="consent_revoked_once")
        ]

    objects = ConsentRevocationQuerySet.as_manager()

    def __str__(self) -> str:
        return f"{self.consent_ref} revoked"
