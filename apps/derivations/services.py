"""Changes to derived artifacts: summaries (with their source pointers) and redaction.

Every service runs in one transaction, appends to the audit chain (ids, digests and field
names, never content) and queues embedding work through the outbox.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from apps.audit.services import audit_record, content_digest, erasure_ledger_append
from apps.core.actors import Actor
from apps.core.errors import Invalid
from apps.records.models import SENSITIVITY_ORDER, Fact, MemoryRecord, RecordStatus, RedactionState
from apps.records.purge import Held, fact_is_held
from apps.records.redaction import MISSING, part_at, redaction_apply, redaction_path_name
from apps.records.selectors import records_live
from apps.records.services import deletion_propagate
from apps.state.models import Episode
from apps.tenancy.models import Tenant
from apps.work.outbox import record_embedding_enqueue, summary_embedding_enqueue

from .embeddings import record_embedding_now
from .models import Summary, SummarySource

MAX_SUMMARY_CHARS = 20_000
MAX_SOURCES = 200
# Episodes carry no sensitivity class of their own; a trace of a run may hold anything the
# agent saw, so it counts as personal data when it lends a summary its class.
EPISODE_SENSITIVITY = "personal"


# A request that is valid by itself but names what the tenant does not have (a source that is
# not there, a part the record's value lacks): 422, the answer to a reference that does not
# resolve, beside 400 for a request that is wrong whatever is stored.
UNRESOLVED = 422


class DerivationRejected(Invalid):
    """Input refused at the boundary: ``errors`` maps field paths to messages."""

    errors: dict[str, list[str]]

    def __init__(self, errors: dict[str, list[str]], status: int = 400) -> None:
        super().__init__(status=status, errors=errors)


@dataclass(frozen=True)
class SourceRef:
    type: str
    id: uuid.UUID


def _source_refs(sources: Sequence[Mapping[str, Any]]) -> list[SourceRef]:
    """The validated sources (``apps.derivations.api.SummaryInput``) as references."""
    return [SourceRef(str(item["type"]), uuid.UUID(str(item["id"]))) for item in sources]


@transaction.atomic
def summary_create(
    *, tenant: Tenant, actor: Actor, text: str, sources: Sequence[Mapping[str, Any]], reason: str
) -> Summary:
    """Store a summary with a pointer to every source (``{"type", "id"}``, at least one, as
    the API's contract checks them). Refused when a source is unknown (another tenant's is
    unknown too). Its sensitivity is the highest of its sources'; it is embedded after commit,
    through the outbox."""
    if not sources:
        raise DerivationRejected({"sources": ["A summary needs at least one source."]})
    errors: dict[str, list[str]] = {}
    refs = _source_refs(sources)
    record_ids = [r.id for r in refs if r.type == "record"]
    # Locked: a concurrent delete either finishes first (the source is unknown here) or waits
    # for this summary and then invalidates it.
    records = {
        r.pk: r for r in records_live().filter(pk__in=record_ids).select_for_update(of=("self",))
    }
    episode_ids: set[uuid.UUID] = set()
    wanted_episodes = [r.id for r in refs if r.type == "episode"]
    if wanted_episodes:
        # Locked like the records: a run's close (which deletes its episodes, then invalidates
        # the summaries citing them) either finishes first or waits for this summary.
        episode_ids = set(
            Episode.objects.filter(pk__in=wanted_episodes)
            .select_for_update(no_key=True)
            .values_list("pk", flat=True)
        )
    for i, ref in enumerate(refs):
        known = records if ref.type == "record" else episode_ids
        if ref.id not in known:
            errors[f"sources[{i}].id"] = [f"No such {ref.type}."]
    if errors:
        raise DerivationRejected(errors, status=UNRESOLVED)
    levels = [SENSITIVITY_ORDER.index(r.sensitivity) for r in records.values()]
    if episode_ids:
        levels.append(SENSITIVITY_ORDER.index(EPISODE_SENSITIVITY))
    # From now on search plans the summary branch for this tenant (in this transaction: a
    # search that can see the summary sees the flag). Asked of the database, not of a
    # possibly stale instance; the row is written (and locked) only the first time.
    Tenant.objects.filter(pk=tenant.pk, summaries_written=False).update(summaries_written=True)
    summary = Summary.objects.create(
        tenant=tenant,
        text=text,
        reason=reason,
        sensitivity=SENSITIVITY_ORDER[max(levels)],
        **actor.fields("writer"),
        created_at=timezone.now(),
    )
    pointers = [
        SummarySource(
            tenant=tenant,
            summary=summary,
            source_type=ref.type,
            source_id=ref.id,
            fact_id=records[ref.id].fact_id if ref.type == "record" else None,
        )
        for ref in dict.fromkeys(refs)  # each source once, in the order given
    ]
    SummarySource.objects.bulk_create(pointers)
    summary_embedding_enqueue(summary)
    audit_record(
        tenant=tenant,
        actor=actor,
        action="summary.create",
        object_type="summary",
        object_id=str(summary.pk),
        digest=content_digest({"summary": text}),
        data={
            "sources": [f"{p.source_type}:{p.source_id}" for p in pointers],
            "sensitivity": summary.sensitivity,
        },
    )
    return summary


@dataclass
class RedactionResult:
    record: Any
    fields: list[str]
    counts: dict[str, int]


@transaction.atomic
def record_redact(
    *, record: Any, actor: Actor, fields: Sequence[str], reason: str
) -> RedactionResult:
    """Rewrite ``fields`` of one record version to the marker, in its value and its text.
    ``fields`` and ``reason`` are as the API's contract or the console's form checked them;
    each path must name a part of the value.

    The record keeps its id and place in the version chain, with ``redaction_state`` applied;
    its embeddings are replaced (re-embedded after commit through the outbox); summaries
    citing it become invalid; stored API responses showing the old value are forgotten. The
    audit event names the fields, never their content.
    """
    errors: dict[str, list[str]] = {}
    fact = Fact.objects.select_for_update().get(pk=record.fact_id)
    if fact_is_held(fact):
        raise Held("A legal hold keeps this record as it is; lift the hold before redacting.")
    record = MemoryRecord.objects.select_for_update().get(pk=record.pk)
    paths = list(dict.fromkeys(fields))
    leaves: dict[str, Any] = {}
    for i, path in enumerate(paths):
        leaf = part_at(record.value, path)
        if leaf is MISSING:
            errors[f"fields[{i}]"] = [f"No such path in the value: {path!r}."]
        else:
            leaves[path] = leaf
    if errors:
        raise DerivationRejected(errors, status=UNRESOLVED)
    removed_digest = content_digest({"record": str(record.pk), "parts": leaves})
    record.value, record.content = redaction_apply(record.value, record.content, leaves)
    record.redaction_state = RedactionState.APPLIED
    record.redaction_fields = sorted(
        set(record.redaction_fields) | {redaction_path_name(p) for p in paths}
    )[:100]
    update = ["value", "content", "redaction_state", "redaction_fields"]
    if record.status == RecordStatus.ACTIVE:
        record.status = RecordStatus.REDACTED
        update.append("status")
    record.save(update_fields=update)
    # What was derived from the old content goes (the record is withdrawn, then embedded
    # anew): embeddings, citing summaries, queued work and stored responses.
    derived = deletion_propagate(record_ids=[record.pk], reason=f"source redacted: {reason}")
    if not record_embedding_now(record):
        record_embedding_enqueue(record)
    withdrawn = derived.counts()
    counts = {
        "embeddings": withdrawn.get("embeddings", 0),
        "summaries_invalidated": withdrawn.get("summaries_invalidated", 0),
    }
    event = audit_record(
        tenant=record.tenant_id,
        actor=actor,
        action="record.redact",
        object_type="record",
        object_id=str(record.pk),
        digest=removed_digest,
        data={
            "fields": [redaction_path_name(p) for p in paths],
            "counts": counts,
            "reason": reason,
            "target": {"record": str(record.pk), "fact": str(fact.pk), "subject": fact.subject},
        },
    )
    derived.stamp(event.pk)
    erasure_ledger_append(
        tenant_id=record.tenant_id,
        kind="redaction",
        target={"records": [record.pk], "fields": paths},
        reason=reason,
        reference=str(event.pk),
    )
    return RedactionResult(record=record, fields=paths, counts=counts)
