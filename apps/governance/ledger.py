"""Re-applying the erasure ledger after a restore: an older backup never brings back what was
erased, deleted, redacted or discarded since it was taken.

Every removal writes an :class:`apps.audit.models.ErasureLedgerEntry` (ids, never content);
``memoryconsole restore`` keeps that table, restores every other one, then calls
:func:`ledger_reapply`. Entries are re-applied by id, so one the backup already reflects
changes nothing: the whole ledger is safe to re-apply, whatever the clocks said. A removal
made after the backup wins over the backup's state (a legal hold it still shows does not keep
erased facts); a redaction goes through ``record_redact``, which a hold refuses: those are
counted as refused and named, for the operator.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.utils import timezone

from apps.audit.models import DeletionReceipt, ErasureLedgerEntry
from apps.audit.services import Actor, audit_record
from apps.core import deletion
from apps.derivations.services import DerivationRejected, record_redact
from apps.governance.services import consent_revoke
from apps.records.models import ConsentRevocation, Fact, MemoryRecord
from apps.records.purge import Held, versions_purge
from apps.records.redaction import REDACTION_MARKER, part_at
from apps.state.models import Obligation, Run, RunState
from apps.state.services import run_close
from apps.tenancy.context import tenant_scope
from apps.tenancy.models import Tenant

RESTORE_ACTOR = Actor.system("restore")


@dataclass
class LedgerReapplied:
    """What re-applying the ledger did: entries read, entries that still removed something
    (by kind), rows removed (by name), and the redactions refused, with why."""

    entries: int = 0
    applied: Counter[str] = field(default_factory=Counter)
    removed: Counter[str] = field(default_factory=Counter)
    refused: list[str] = field(default_factory=list)


def ledger_reapply(*, progress: Callable[[int, int], None] | None = None) -> LedgerReapplied:
    """Re-apply every ledger entry of every tenant, oldest first, each in its own
    transaction. ``progress`` is called with (entries done, entries) after each one."""
    report = LedgerReapplied()
    work: list[tuple[Any, Any]] = []
    for tenant_id in Tenant.objects.values_list("pk", flat=True):
        with tenant_scope(tenant_id):
            work.extend(
                (tenant_id, pk)
                for pk in ErasureLedgerEntry.objects.filter(tenant_id=tenant_id)
                .order_by("recorded_at", "id")
                .values_list("pk", flat=True)
            )
    for done, (tenant_id, pk) in enumerate(work, start=1):
        with tenant_scope(tenant_id):
            entry = ErasureLedgerEntry.objects.get(pk=pk)
            _reapply(entry, report)
        report.entries += 1
        if progress is not None:
            progress(done, len(work))
    return report


def _reapply(entry: ErasureLedgerEntry, report: LedgerReapplied) -> None:
    target = entry.target
    reason = f"re-applied after a restore ({entry.kind} {entry.reference}): {entry.reason}"
    removed: dict[str, int] = {}
    if target.get("facts") or (entry.kind == "deletion" and target.get("records")):
        removed.update(_purge(entry, reason))
    if target.get("runs") or target.get("obligations"):
        if entry.kind == "run_close":
            removed.update(_close_runs(target.get("runs", []), reason))
        else:
            removed.update(_erase_state(entry.tenant_id, target, reason))
    if entry.kind == "redaction":
        removed.update(_redact(entry, reason, report))
    if entry.kind == "consent_revoke":
        removed.update(_revoke_consents(entry, reason))
    removed = {name: count for name, count in removed.items() if count}
    if removed:
        report.applied[entry.kind] += 1
        report.removed.update(removed)


def _purge(entry: ErasureLedgerEntry, reason: str) -> dict[str, int]:
    """Delete the facts (whole) and versions the entry names that the restored data holds,
    as the erasure or deletion did, with a receipt saying so."""
    fact_ids = list(
        Fact.objects.filter(pk__in=entry.target.get("facts", []))
        .select_for_update()
        .values_list("pk", flat=True)
    )
    versions = MemoryRecord.objects.filter(fact_id__in=fact_ids) | MemoryRecord.objects.filter(
        pk__in=entry.target.get("records", [])
    )
    record_ids = list(versions.select_for_update().values_list("pk", flat=True))
    if not record_ids and not fact_ids:
        return {}
    now = timezone.now()
    purge = versions_purge(record_ids=record_ids, fact_ids=fact_ids, reason=reason, now=now)
    counts = purge.counts()
    receipt = DeletionReceipt.objects.create(
        tenant_id=entry.tenant_id,
        kind="erasure" if entry.kind == "erasure" else "record",
        requested_by_type=RESTORE_ACTOR.type,
        requested_by_id=RESTORE_ACTOR.id,
        requested_by_label=RESTORE_ACTOR.label,
        reason=reason[:2000],
        deleted_at=now,
        fact_id=fact_ids[0] if len(fact_ids) == 1 else None,
        record_ids=[str(pk) for pk in record_ids],
        counts={**counts, "ledger_entry": str(entry.pk)},
    )
    event = audit_record(
        tenant=entry.tenant_id,
        actor=RESTORE_ACTOR,
        action="restore.reapply",
        object_type="deletion_receipt",
        object_id=str(receipt.pk),
        data={"kind": entry.kind, "ledger_entry": str(entry.pk), "counts": counts},
    )
    purge.stamp(event.pk)
    counts["facts"] = len(fact_ids)
    counts["records"] = counts.pop("versions", len(record_ids))
    return counts


def _erase_state(tenant_id: Any, target: dict[str, Any], reason: str) -> dict[str, int]:
    """Delete the runs and strip the obligations an erasure removed (as
    :mod:`apps.governance.state_erasure` does), where the restored data still has them."""
    runs = list(
        Run.objects.filter(pk__in=target.get("runs", []))
        .select_for_update()
        .values_list("pk", flat=True)
    )
    # Only obligations still holding what the erasure stripped.
    obligations = list(
        Obligation.objects.filter(pk__in=target.get("obligations", []))
        .exclude(payload={}, result__isnull=True)
        .select_for_update(no_key=True)
        .values_list("pk", flat=True)
    )
    if not runs and not obligations:
        return {}
    outcome = deletion.run(
        deleted={Run: runs}, withdrawn={Obligation: obligations}, now=timezone.now(), reason=reason
    )
    event = audit_record(
        tenant=tenant_id,
        actor=RESTORE_ACTOR,
        action="restore.reapply",
        object_type="erasure",
        data={"runs": [str(pk) for pk in runs], "obligations": [str(pk) for pk in obligations]},
    )
    outcome.stamp(event.pk)
    return {"runs": len(runs), "obligations": len(obligations)}


def _close_runs(run_ids: list[str], reason: str) -> dict[str, int]:
    runs = list(Run.objects.filter(pk__in=run_ids).exclude(state=RunState.CLOSED))
    for run in runs:
        run_close(run=run, actor=RESTORE_ACTOR, reason=reason)
    return {"runs_closed": len(runs)}


def _revoke_consents(entry: ErasureLedgerEntry, reason: str) -> dict[str, int]:
    """Revoke again each consent the restored data does not know was revoked: what was
    written under it expires (derived artifacts with it) and new writes citing it are refused,
    as the revocation did. ``force``: the restored data may predate every write citing it."""
    revoked = expired = 0
    tenant = Tenant.objects.get(pk=entry.tenant_id)
    for consent_ref in entry.target.get("consent_refs", []):
        if ConsentRevocation.objects.filter(consent_ref=consent_ref).exists():
            continue
        revocation = consent_revoke(
            tenant=tenant, consent_ref=consent_ref, actor=RESTORE_ACTOR, reason=reason, force=True
        )
        revoked += 1
        expired += revocation.records_expired
    return {"consents_revoked": revoked, "records_expired": expired}


def _redact(entry: ErasureLedgerEntry, reason: str, report: LedgerReapplied) -> dict[str, int]:
    fields = list(entry.target.get("fields", []))
    record = MemoryRecord.objects.filter(pk__in=entry.target.get("records", [])).first()
    if record is None or not fields:
        return {}
    if all(part_at(record.value, path) == REDACTION_MARKER for path in fields):
        return {}
    try:
        with transaction.atomic():
            record_redact(record=record, actor=RESTORE_ACTOR, fields=fields, reason=reason)
    except Held:
        report.refused.append(f"record {record.pk}: a legal hold in the restored data")
        return {}
    except DerivationRejected as exc:
        # The restored version does not have the redacted path (it cannot differ from the
        # version redacted, which never changes but by redaction): say so, never guess.
        report.refused.append(f"record {record.pk}: {exc}")
        return {}
    return {"redactions": 1}
