"""Check that a deletion left nothing behind: every store is searched for the deleted ids.

Looked at, in the receipt's tenant: records and their versions, facts, embeddings (of the
records, and of valid summaries citing them), valid summaries citing them, the full-text
column (it lives in the records table, so a remaining row is the only way to be found),
outbox rows, stored API responses (by resource and by any mention of an id), and audit
events about the records (they may name ids and digests, never hold content: a payload with
a content-bearing member counts as a residue). The receipt's content digest is looked for
where a digest could leak content's identity outside the audit chain: embeddings and stored
responses.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from django.db import connection

from apps.audit.models import AuditEvent, DeletionReceipt

CHUNK = 2000
CONTENT_MEMBERS = ("value", "content", "text", "response_body")


@dataclass
class Residue:
    store: str
    detail: str


@dataclass
class Verification:
    receipt_id: str
    record_ids: list[str] = field(default_factory=list)
    residues: list[Residue] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.residues


def _chunks(items: list[str]) -> Iterator[list[str]]:
    for start in range(0, len(items), CHUNK):
        yield items[start : start + CHUNK]


def _content_members(data: Any) -> list[str]:
    found: list[str] = []
    if isinstance(data, dict):
        for key, value in data.items():
            if key in CONTENT_MEMBERS:
                found.append(str(key))
            found.extend(_content_members(value))
    elif isinstance(data, list):
        for item in data:
            found.extend(_content_members(item))
    return found


def erasure_verify(receipt: DeletionReceipt) -> Verification:
    """Search every store of the current tenant for what ``receipt`` says was deleted."""
    from apps.api.models import IdempotencyKey
    from apps.records.models import Fact, MemoryRecord

    from .models import Embedding, OutboxMessage, SummarySource

    receipts = [receipt, *DeletionReceipt.objects.filter(parent=receipt)]
    record_ids = sorted({rid for r in receipts for rid in r.record_ids})
    fact_ids = sorted({str(r.fact_id) for r in receipts if r.fact_id})
    digests = sorted({r.content_digest for r in receipts if r.content_digest})
    result = Verification(receipt_id=str(receipt.pk), record_ids=record_ids)

    def found(store: str, detail: str) -> None:
        result.residues.append(Residue(store, detail))

    for ids in _chunks(record_ids):
        for record_pk in MemoryRecord.objects.filter(pk__in=ids).values_list("pk", flat=True):
            found("records (and their full-text entries)", f"record {record_pk} still exists")
        for row in Embedding.objects.filter(record_id__in=ids).values_list("pk", "record_id"):
            found("embeddings", f"embedding {row[0]} of record {row[1]}")
        citing = SummarySource.objects.filter(
            source_type="record", source_id__in=ids, summary__valid=True
        )
        for sid, source in citing.values_list("summary_id", "source_id"):
            found("summaries", f"valid summary {sid} cites record {source}")
        for embedding_pk in Embedding.objects.filter(
            summary_id__in=SummarySource.objects.filter(source_id__in=ids).values("summary_id")
        ).values_list("pk", flat=True):
            found("embeddings", f"embedding {embedding_pk} of a summary citing a deleted record")
        for outbox_pk in OutboxMessage.objects.filter(object_id__in=ids).values_list(
            "pk", flat=True
        ):
            found("outbox", f"outbox row {outbox_pk}")
        for key_pk in IdempotencyKey.objects.filter(resource_id__in=ids).values_list(
            "pk", flat=True
        ):
            found("idempotency responses", f"stored response {key_pk} describes a deleted record")
        pattern = "|".join(re.escape(i) for i in ids)
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT id FROM api_idempotencykey WHERE response_body::text ~ %s", [pattern]
            )
            for (pk,) in cursor.fetchall():
                found("idempotency responses", f"stored response {pk} mentions a deleted id")
            cursor.execute(
                "SELECT id FROM derivations_outboxmessage WHERE payload::text ~ %s", [pattern]
            )
            for (pk,) in cursor.fetchall():
                found("outbox", f"outbox row {pk} names a deleted id")
        for event in AuditEvent.objects.filter(object_id__in=ids).only("seq", "data"):
            members = _content_members(event.data)
            if members:
                found("audit payloads", f"event #{event.seq} carries {', '.join(members)}")
    result.checked += [
        "records and versions",
        "full-text (records table)",
        "embeddings",
        "summaries",
        "outbox",
        "idempotency responses",
        "audit payloads",
    ]
    for ids in _chunks(fact_ids):
        for pk in Fact.objects.filter(pk__in=ids).values_list("pk", flat=True):
            if not MemoryRecord.objects.filter(fact_id=pk).exists() or receipt.kind != "expiry":
                found("records and versions", f"fact {pk} still exists")
    result.checked.append("facts")
    for digest in digests:
        if Embedding.objects.filter(content_digest=digest).exists():
            found("embeddings", f"an embedding carries the content digest {digest[:12]}…")
        if IdempotencyKey.objects.filter(response_body__icontains=digest).exists():
            found("idempotency responses", f"a stored response carries digest {digest[:12]}…")
    result.checked.append("content digest")
    return result
