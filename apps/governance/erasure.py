"""Erasure by subject, owner or consent: set-based, in batches, with a receipt per fact.

Each batch of facts goes through ``record_delete``'s statement
(:func:`apps.records.purge.versions_purge`, generated from the deletion definition, each
batch bound once as an array), so erasure keeps its guarantees at any size. A whole fact goes
when any version matches (keeping the rest would keep the history of what was erased); facts
under an active legal hold are skipped and counted. Each fact leaves a ``DeletionReceipt``
under one parent receipt of kind ``erasure`` carrying the totals.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import connection, transaction
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from apps.audit.models import DeletionReceipt
from apps.audit.services import (
    Actor,
    audit_append,
    audit_event,
    audit_record,
    content_digest,
    erasure_ledger_append,
)
from apps.core import deletion
from apps.derivations.services import DerivationRejected
from apps.records.models import Fact, LegalHold, MemoryRecord
from apps.records.purge import versions_purge
from apps.tenancy.context import id_array, prepared_cursor
from apps.tenancy.models import Tenant

from .preview import DeletionPreview, facts_deletion_preview
from .state_erasure import STATE_TOTALS, state_erase, state_erasure_counts

BATCH_FACTS = 5000
# Per-fact receipt ids an erasure's result lists (``receipts_truncated`` says when there are more).
RECEIPT_IDS_LISTED = 1000
SELECTORS = ("subject", "owner", "consent_ref")
# The facts erased, then what the deletion definition counts (versions are called records
# here), the state layer's (apps.governance.state_erasure) among them.
TOTALS = (
    "facts",
    *dict.fromkeys(
        "records" if name == "versions" else name
        for name in (*deletion.definition().counted_names(), *STATE_TOTALS)
    ),
)


@dataclass
class ErasureResult:
    receipt: DeletionReceipt
    totals: dict[str, int] = field(default_factory=dict)
    receipt_ids: list[str] = field(default_factory=list)

    @property
    def receipts_truncated(self) -> bool:
        """More per-fact receipts were written than ``receipt_ids`` lists."""
        return self.totals.get("facts", 0) > len(self.receipt_ids)


def _held_q() -> Q:
    """An active legal hold covers the outer query's fact."""
    holds = LegalHold.objects.active().covering(subject=OuterRef("subject"), fact=OuterRef("pk"))
    return Q(Exists(holds))


def _matching_facts(selector: str, value: str) -> QuerySet[Fact]:
    if selector not in SELECTORS:
        raise DerivationRejected({"": ["Give one of subject, owner or consent_ref."]})
    if selector == "subject":
        return Fact.objects.filter(subject=value)
    return Fact.objects.filter(
        pk__in=MemoryRecord.objects.filter(**{selector: value}).values("fact_id")
    )


def _held(matching: QuerySet[Fact]) -> tuple[int, int]:
    """The facts of ``matching`` a legal hold keeps, and their versions."""
    held = matching.filter(_held_q())
    return held.count(), MemoryRecord.objects.filter(fact_id__in=held.values("pk")).count()


# Ids listed by a dry run (its counts are complete).
DRY_RUN_IDS_LISTED = 1000


@dataclass(frozen=True)
class ErasurePreview:
    """What an erasure would do now, changing nothing: the deletion preview of the facts it
    would erase, and what a legal hold keeps."""

    removal: DeletionPreview
    held_facts: int
    held_records: int
    state: dict[str, int]

    @property
    def records(self) -> int:
        """Every version matching, held ones included (the scale of the work)."""
        return self.removal.version_count + self.held_records

    def totals(self) -> dict[str, int]:
        """The totals the erasure would report (the names of ``erasure_run``'s totals)."""
        return {
            **self.removal.totals(),
            **self.state,
            "held_facts": self.held_facts,
            "held_records": self.held_records,
        }


def erasure_preview(*, selector: str, value: str) -> ErasurePreview:
    """What ``erasure_run`` with ``selector = value`` would remove now, in the current tenant:
    the same facts (held ones set aside) read as :func:`facts_deletion_preview` reads them."""
    matching = _matching_facts(selector, value)
    erasable = matching.exclude(_held_q()).values("pk")
    removal = facts_deletion_preview(erasable, listed=DRY_RUN_IDS_LISTED)
    state = state_erasure_counts(selector=selector, value=value)
    return ErasurePreview(removal, *_held(matching), state)


def erasure_records_matching(*, selector: str, value: str) -> int:
    """How many records an erasure by ``selector = value`` would cover (held ones included):
    the scale that decides whether it runs in the request or as a job."""
    matching = _matching_facts(selector, value)
    return MemoryRecord.objects.filter(fact_id__in=matching.values("pk")).count()


def erasure_input_check(selector: str, value: str, reason: str, *, by_field: bool) -> None:
    """Refuse an erasure's input; ``by_field``: each error under the name of the field that
    gave it (a job's, the console form's), else under the selector's."""
    if selector not in SELECTORS:
        raise DerivationRejected(
            {"selector" if by_field else "": ["Give one of subject, owner or consent_ref."]}
        )
    if not value or len(value) > 200:
        raise DerivationRejected({"value" if by_field else selector: ["1 to 200 characters."]})
    if not reason.strip():
        raise DerivationRejected({"reason": ["Required, non-empty."]})


# One transaction, always: the per-fact receipts commit with the erasure's receipt, whose
# reclamation stamp they read (DeletionReceipt.storage_reclaimed_at).
@transaction.atomic
def erasure_run(
    *,
    tenant: Tenant,
    actor: Actor,
    selector: str,
    value: str,
    reason: str,
    progress: Callable[[int, int], None] | None = None,
) -> ErasureResult:
    """Erase every fact (all versions) with a version matching ``selector = value``.

    ``progress``, if given, is called after each batch with (records erased so far, records
    to erase), the latter counted once at the start (held facts excluded)."""
    erasure_input_check(selector, value, reason, by_field=False)
    now = timezone.now()
    with transaction.atomic():
        parent = DeletionReceipt.objects.create(
            tenant=tenant,
            kind="erasure",
            **actor.fields("requested_by"),
            reason=reason,
            deleted_at=now,
            counts={"selector": selector},
            content_digest=content_digest({selector: value}),
        )
    # Foreign-key checks run through plans PostgreSQL caches per session, made when this
    # session first deleted a row of each table. A long-lived session's plans can predate the
    # data's growth (a scan that suited a small table), and an erasure runs such checks for
    # every row it removes: plan them afresh, against the tables as they are now.
    with connection.cursor() as cursor:
        cursor.execute("DISCARD PLANS")
    totals: dict[str, int] = defaultdict(int, dict.fromkeys(TOTALS, 0))
    receipt_ids: list[str] = []
    matching = _matching_facts(selector, value)
    totals["held_facts"], totals["held_records"] = _held(matching)
    to_erase = 0
    if progress is not None:
        to_erase = erasure_records_matching(selector=selector, value=value) - totals["held_records"]
    while True:
        with transaction.atomic():
            fact_ids = list(
                matching.exclude(_held_q())
                .order_by("pk")
                .select_for_update(skip_locked=False)
                .values_list("pk", flat=True)[:BATCH_FACTS]
            )
            if not fact_ids:
                break
            counts, batch_receipts = _erase_batch(
                tenant, actor, parent, fact_ids, reason, {selector: value}
            )
            erasure_ledger_append(
                tenant_id=tenant.pk,
                kind="erasure",
                target={"facts": fact_ids},
                reason=reason,
                reference=str(parent.pk),
            )
        receipt_ids += batch_receipts[: RECEIPT_IDS_LISTED - len(receipt_ids)]
        for name, count in counts.items():
            totals[name] += count
        if progress is not None:
            progress(totals["records"], max(to_erase, totals["records"]))
    with transaction.atomic():
        state = state_erase(selector=selector, value=value, reason=reason)
        if state.ids["runs"] or state.ids["obligations"]:
            erasure_ledger_append(
                tenant_id=tenant.pk,
                kind="erasure",
                target={"runs": state.ids["runs"], "obligations": state.ids["obligations"]},
                reason=reason,
                reference=str(parent.pk),
            )
    for name, count in state.counts.items():
        totals[name] += count
    with transaction.atomic():
        event = audit_record(
            tenant=tenant,
            actor=actor,
            action="erasure.complete",
            object_type="deletion_receipt",
            object_id=str(parent.pk),
            digest=parent.content_digest,
            data={
                "selector": selector,
                "totals": dict(totals),
                "reason": reason,
                "target": {selector: value},
            },
        )
        parent.counts = {
            "selector": selector,
            **totals,
            "audit_event": str(event.pk),
            # What verify-erasure looks for again (apps.governance.state_erasure).
            "state_erased": state.ids,
        }
        parent.deleted_at = timezone.now()
        parent.save(update_fields=["counts", "deleted_at"])
    return ErasureResult(receipt=parent, totals=dict(totals), receipt_ids=receipt_ids)


# One receipt per fact, the batch's receipts sent as one JSON document (one ``json.dumps``,
# rather than five arrays adapted element by element).
INSERT_RECEIPTS = """
INSERT INTO audit_deletionreceipt (id, tenant_id, kind, requested_by_type, requested_by_id,
    requested_by_label, reason, deleted_at, fact_id, record_ids, counts, content_digest,
    parent_id)
SELECT gen_random_uuid(), %(tenant)s, 'record', %(actor_type)s, %(actor_id)s, %(actor_label)s,
       %(reason)s, %(now)s, r.fact_id, r.record_ids, r.counts, r.digest, %(parent)s
  FROM jsonb_to_recordset(%(receipts)s::jsonb)
       AS r(fact_id uuid, record_ids jsonb, counts jsonb, digest text)
RETURNING id::text
"""


def _erase_batch(
    tenant: Tenant,
    actor: Actor,
    parent: DeletionReceipt,
    fact_ids: list[Any],
    reason: str,
    target: dict[str, str],
) -> tuple[dict[str, int], list[str]]:
    """Erase the facts ``fact_ids``: their counts (versions as ``records``), and the ids of
    their receipts."""
    now = timezone.now()
    # Server-side binding (prepared_cursor): the batch's ids travel as array parameters
    # (id_array), not as literals built into the statement; they come back as text.
    with prepared_cursor() as cursor:
        cursor.execute(
            "SELECT id::text, fact_id::text, subject, key, value::text, content"
            " FROM records_memoryrecord"
            " WHERE fact_id = ANY(%s::uuid[]) ORDER BY fact_id, version FOR UPDATE",
            [id_array(fact_ids)],
        )
        rows = cursor.fetchall()
    record_ids = [row[0] for row in rows]
    purge = versions_purge(
        record_ids=record_ids, fact_ids=fact_ids, reason=f"source erased: {reason}", now=now
    )
    by_fact: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
    for row in rows:
        by_fact[row[1]].append(row)
    receipts = [
        {
            "fact_id": fact_id,
            "record_ids": [version[0] for version in versions],
            "counts": {"versions": len(versions)},
            "digest": _fact_digest(versions),
        }
        for fact_id, versions in by_fact.items()
    ]
    with prepared_cursor() as cursor:
        cursor.execute(
            INSERT_RECEIPTS,
            {
                "tenant": tenant.pk,
                **actor.fields("actor"),
                "reason": reason,
                "now": now,
                "parent": parent.pk,
                "receipts": json.dumps(receipts),
            },
        )
        receipt_ids = [row[0] for row in cursor.fetchall()]
    event = audit_event(
        tenant=tenant,
        actor=actor,
        action="erasure.batch",
        object_type="deletion_receipt",
        object_id=str(parent.pk),
        data={
            "facts": [str(pk) for pk in fact_ids],
            "records": len(record_ids),
            "reason": reason,
            "target": target,
        },
    )
    # The event, and the invalidated summaries naming it, in one statement.
    audit_append(event, alongside=purge.stamp_statements(event.pk))
    counts = purge.counts()
    counts["records"] = counts.pop("versions")
    return {**counts, "facts": len(fact_ids)}, receipt_ids


def _fact_digest(versions: list[tuple[Any, ...]]) -> str:
    """The digest ``record_delete`` would give the same versions (see ``record_digest``)."""
    return content_digest(
        [
            content_digest(
                {"subject": subject, "key": key, "value": json.loads(value), "content": content}
            )
            for _pk, _fact, subject, key, value, content in versions
        ]
    )
