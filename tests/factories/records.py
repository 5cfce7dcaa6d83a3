"""Facts and their versions, and what review and governance keep about them.

These are bare rows in the state a test names, for set-up that the write path would take many
requests to reach (a conflict resolved long ago, 50 holds, 5,000 facts of one subject). A test
of the write path itself writes through the API or ``record_write``, which also stores the
observation, the audit event and the outbox message of each write.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import factory
from django.db.models import F
from django.db.models.functions import Greatest

from apps.records.models import (
    Conflict,
    ConsentRevocation,
    Fact,
    LegalHold,
    MemoryRecord,
    Observation,
    PromotionRequest,
    RetentionRule,
    Scope,
    scope_canonical,
)
from apps.tenancy.context import tenant_scope

from .base import TenantOwnedFactory, now

SAME_TENANT = factory.SelfAttribute("..tenant")


class ScopeFactory(TenantOwnedFactory[Scope]):
    """A tenant's scope; the same canonical form gives the existing row, as on the write path."""

    domain = "commerce"
    task_type = ""
    conditions = factory.LazyFunction(dict)
    canonical = factory.LazyAttribute(
        lambda o: scope_canonical(o.domain, o.task_type, o.conditions)
    )

    class Meta:
        model = Scope
        django_get_or_create = ("tenant", "canonical")


class FactFactory(TenantOwnedFactory[Fact]):
    """A fact without versions (``last_version`` 0); a record made for it updates its head."""

    subject = factory.Sequence(lambda n: f"user:{n}")
    key = "shipping.preference"
    scope = factory.SubFactory(ScopeFactory, tenant=SAME_TENANT)

    class Meta:
        model = Fact


class MemoryRecordFactory(TenantOwnedFactory[MemoryRecord]):
    """A version of a fact, current and active unless told otherwise, with no expiry
    (retention ``indefinite``). Its subject, key and scope are its fact's.

    Created (not built), it moves its fact's head as the write path would: ``last_version``
    up to its version and, when ``is_current``, the current pointer to it. Built rows for
    :func:`~tests.factories.base.bulk_save` leave the facts to the caller (one set-based
    UPDATE for a corpus)."""

    fact = factory.SubFactory(FactFactory, tenant=SAME_TENANT)
    subject = factory.SelfAttribute("fact.subject")
    key = factory.SelfAttribute("fact.key")
    version = 1
    value = "carrier_a"
    content = factory.LazyAttribute(lambda o: f"{o.key}: {o.value}")
    source_kind = "interaction"
    source_ref = factory.Sequence(lambda n: f"interaction:{n}")
    writer_type = "system"
    writer_id = ""
    writer_label = "tests"
    observed_at = factory.LazyFunction(now)
    written_at = factory.SelfAttribute("observed_at")
    owner = "user:alice"
    reason = "applied in checkout flow"
    scope_domain = factory.SelfAttribute("fact.scope.domain")
    scope_task_type = factory.SelfAttribute("fact.scope.task_type")
    scope_conditions = factory.SelfAttribute("fact.scope.conditions")
    sensitivity = "personal"
    retention_basis = "indefinite"
    trust = "provisional"
    status = "active"
    is_current = True
    current_from = factory.Maybe("is_current", factory.SelfAttribute("written_at"), None)

    class Meta:
        model = MemoryRecord

    @factory.post_generation
    def head(record: MemoryRecord, create: bool, extracted: Any, **kwargs: Any) -> None:
        if not create:
            return
        changes: dict[str, Any] = {"last_version": Greatest(F("last_version"), record.version)}
        if record.is_current:
            changes["current"] = record
        with tenant_scope(record.tenant_id):
            Fact.objects.filter(pk=record.fact_id).update(**changes)
        fact = record.fact
        fact.last_version = max(fact.last_version, record.version)
        if record.is_current:
            fact.current = record


class ObservationFactory(TenantOwnedFactory[Observation]):
    """An observation of a record, by default its first (the record's own source)."""

    record = factory.SubFactory(MemoryRecordFactory, tenant=SAME_TENANT)
    source_kind = factory.SelfAttribute("record.source_kind")
    source_ref = factory.SelfAttribute("record.source_ref")
    observed_at = factory.SelfAttribute("record.observed_at")
    recorded_at = factory.SelfAttribute("record.written_at")
    writer_type = factory.SelfAttribute("record.writer_type")
    writer_id = factory.SelfAttribute("record.writer_id")
    writer_label = factory.SelfAttribute("record.writer_label")
    reason = factory.SelfAttribute("record.reason")

    class Meta:
        model = Observation


class PromotionRequestFactory(TenantOwnedFactory[PromotionRequest]):
    """An open request to confirm a provisional record."""

    record = factory.SubFactory(MemoryRecordFactory, tenant=SAME_TENANT)
    evidence = factory.LazyFunction(dict)
    reason = "second independent observation"
    requested_by_type = "system"
    requested_by_label = "tests"
    requested_at = factory.LazyFunction(now)

    class Meta:
        model = PromotionRequest


class ConflictFactory(TenantOwnedFactory[Conflict]):
    """An open conflict: the fact's current version against a contender (version 2)."""

    fact = factory.SubFactory(FactFactory, tenant=SAME_TENANT)
    current_record = factory.SubFactory(
        MemoryRecordFactory, tenant=SAME_TENANT, fact=factory.SelfAttribute("..fact")
    )
    contender = factory.SubFactory(
        MemoryRecordFactory,
        tenant=SAME_TENANT,
        fact=factory.SelfAttribute("..fact"),
        version=factory.LazyAttribute(lambda o: o.factory_parent.current_record.version + 1),
        value="carrier_b",
        is_current=False,
    )
    opened_at = factory.LazyFunction(now)

    class Meta:
        model = Conflict


class LegalHoldFactory(TenantOwnedFactory[LegalHold]):
    """A hold in force on a subject (pass ``fact=`` and ``subject=""`` for one fact)."""

    subject = "user:8812"
    fact = None
    reason = "litigation"
    placed_by_label = "tests"
    placed_at = factory.LazyFunction(now)

    class Meta:
        model = LegalHold


class RetentionRuleFactory(TenantOwnedFactory[RetentionRule]):
    """A tenant's own retention limits for one sensitivity class."""

    sensitivity = "personal"
    provisional_max = timedelta(days=30)
    confirmed_max = timedelta(days=365)

    class Meta:
        model = RetentionRule


class ConsentRevocationFactory(TenantOwnedFactory[ConsentRevocation]):
    """A revocation row alone (``consent_revoke`` also expires the records citing it)."""

    consent_ref = factory.Sequence(lambda n: f"consent:{n}")
    revoked_at = factory.LazyFunction(now)
    revoked_by_label = "tests"

    class Meta:
        model = ConsentRevocation
