"""Governance of what the memory keeps: consent revocations, legal holds, retention rules.

Each is a keyword-only service the API and the console both call, in one transaction with its
audit event. What an expiry does to what was derived from the records it ends is the deletion
definition's withdrawal (:mod:`apps.core.deletion`, through
:func:`apps.records.services.deletion_propagate`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from apps.audit.models import DeletionReceipt
from apps.audit.services import Actor, audit_record, content_digest, erasure_ledger_append
from apps.core.errors import Invalid, Unprocessable
from apps.records.models import (
    FRESH_OBSERVATION,
    ConsentRevocation,
    Fact,
    LegalHold,
    MemoryRecord,
    RecordStatus,
    RetentionRule,
    Sensitivity,
    Trust,
    class_limits,
    lifetime_start_expression,
    records_shortened_by,
)
from apps.records.services import RecordError, deletion_propagate
from apps.records.validation import consent_ref_problem
from apps.tenancy.models import Tenant


@transaction.atomic
def consent_revoke(
    *, tenant: Tenant, consent_ref: str, actor: Actor, reason: str, force: bool = False
) -> ConsentRevocation:
    """Expire everything written under ``consent_ref`` (but what a legal hold keeps) and refuse
    new writes citing it; revoking twice is harmless. It cannot be undone, so it needs a reason,
    and a reference the tenant never used is refused as a likely misspelling (422) unless
    ``force`` (revoking before any write cites it)."""
    if problem := consent_ref_problem(consent_ref):
        raise Invalid("Invalid consent reference.", errors={"consent_ref": [problem]})
    if not reason.strip():
        raise Invalid("Revoking a consent needs a reason.", field="reason")
    existing = ConsentRevocation.objects.filter(consent_ref=consent_ref).first()
    if existing is not None:
        return existing
    if not force and not consent_ref_used(consent_ref):
        raise Unprocessable(
            f"No record of this tenant was written under the consent reference {consent_ref!r}"
            " (nor erased by it); nothing was revoked. Check the reference, or send"
            ' "force": true to revoke it before any write cites it.',
            slug="consent-unknown",
            field="consent_ref",
        )
    now = timezone.now()
    affected = (
        MemoryRecord.objects.filter(consent_ref=consent_ref)
        .exclude(status=RecordStatus.EXPIRED)
        .not_held()
    )
    affected_pks = list(affected.values_list("pk", flat=True))
    count = affected.update(status=RecordStatus.EXPIRED, expires_at=now)
    # Expired sources take their derived artifacts with them now, not at compaction, and a
    # replayed write must not hand back what the consent no longer covers.
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
            "force": force,
            "target": {"consent_ref": consent_ref},
        },
    )
    derived.stamp(event.pk)
    # A restore of a backup taken before now revokes it again (apps.governance.ledger):
    # the records it expired stay expired, and the reference stays refused.
    erasure_ledger_append(
        tenant_id=tenant.pk,
        kind="consent_revoke",
        target={"consent_refs": [consent_ref], "records": affected_pks},
        reason=reason,
        reference=str(revocation.pk),
    )
    return revocation


def consent_ref_used(consent_ref: str) -> bool:
    """Whether the current tenant ever used ``consent_ref``: a record (of any status) written
    under it, or an erasure by it (whose records are gone)."""
    if MemoryRecord.objects.filter(consent_ref=consent_ref).exists():
        return True
    return DeletionReceipt.objects.filter(
        kind="erasure",
        counts__selector="consent_ref",
        content_digest=content_digest({"consent_ref": consent_ref}),
    ).exists()


@transaction.atomic
def legal_hold_place(
    *, tenant: Tenant, actor: Actor, reason: str, subject: str = "", fact: Fact | None = None
) -> Any:
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

    provisional_max: timedelta
    confirmed_max: timedelta | None
    expired: int
    shortened: int

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
    for the class's live records: each one's expiry becomes the earlier of its own and its
    lifetime's start plus the new limit of its trust. Versions this ends now expire as any
    expiry does (summaries invalidated, embeddings removed), in this transaction.

    A change that ends or shortens existing records needs a ``reason``. ``dry_run`` counts
    what the change would do and changes nothing. One audit event holds the old and new
    rule, the counts and the reason."""
    errors: dict[str, list[str]] = {}
    if sensitivity not in Sensitivity.values:
        errors["sensitivity"] = [f"One of: {', '.join(Sensitivity.values)}."]
    if provisional_max < FRESH_OBSERVATION:
        # The write path trusts that an observation this fresh has outlived no rule.
        errors["provisional_max"] = ["At least one minute."]
    if confirmed_max is not None and confirmed_max < provisional_max:
        errors["confirmed_max"] = ["Confirmed records may not expire before provisional ones."]
    if errors:
        raise Invalid(
            " ".join(message for field in errors.values() for message in field), errors=errors
        )
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
        expired = ending_now.count()
        return RetentionChange(provisional_max, confirmed_max, expired, shortened.count() - expired)
    # Lock what changes, then decide on the locked rows (a write's promotion waits here and
    # reads the new rule after commit).
    shortened_pks = list(shortened.select_for_update(of=("self",)).values_list("pk", flat=True))
    expired_pks = list(ending_now.filter(pk__in=shortened_pks).values_list("pk", flat=True))
    if shortened_pks and not reason.strip():
        raise Invalid(
            "Say why: this change shortens the lifetime of existing records.", field="reason"
        )
    # Only earlier expiries were selected, so the new limit is each one's minimum.
    for trust, limit in ((Trust.PROVISIONAL, provisional_max), (Trust.CONFIRMED, confirmed_max)):
        if limit is not None:
            MemoryRecord.objects.filter(pk__in=shortened_pks, trust=trust).update(
                expires_at=lifetime_start_expression() + limit
            )
    # Expired now, like a revoked consent's records: nothing may replay or cite them.
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
        provisional_max, confirmed_max, len(expired_pks), len(shortened_pks) - len(expired_pks)
    )
