"""Check that a deletion left nothing behind: every store of the receipt's tenant is searched.

Searched: whatever the deletion definition says deleting the versions and facts removes,
rewrites or withdraws (:meth:`apps.core.deletion.Plan.residues`); stored API responses and
outbox payloads by any mention of an id; the SQL broker's undelivered messages (decoded, by id
and digest); audit events about the records (ids and digests only: a content-bearing member is
a residue). A stored response naming a deleted id and nothing else (a deletion's tombstone, a
search's or a batch write's memo of ids) is kept on purpose, not a residue. The content digest
is looked for where it could leak content's identity outside the audit chain: embeddings and
stored responses. An erasure's state is looked for by the ids its receipt keeps and by what an
erasure by the same subject or owner would reach now (``apps.governance.state_erasure``), the
erased value read back from its ``erasure.complete`` event (the receipt keeps only its digest).
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from celery import current_app
from django.conf import settings
from django.db import DatabaseError, connection

from apps.api.idempotency import tombstone_body
from apps.api.models import IdempotencyKey
from apps.audit.models import AuditEvent, DeletionReceipt
from apps.audit.services import content_digest
from apps.core import deletion
from apps.derivations.models import Embedding
from apps.governance.state_erasure import STATE_MODELS, state_residues
from apps.records.batch_api import batch_memo_content_free
from apps.records.models import Fact, MemoryRecord
from apps.tenancy import replicas

CHUNK = 2000
CONTENT_MEMBERS = ("value", "content", "text", "response_body")


@dataclass
class Residue:
    store: str
    detail: str


@dataclass
class Verification:
    record_ids: list[str] = field(default_factory=list)
    residues: list[Residue] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)
    fact_ids: list[str] = field(default_factory=list)  # the facts the deletion removed

    @property
    def ok(self) -> bool:
        return not self.residues


def _chunks(items: list[str]) -> Iterator[list[str]]:
    for start in range(0, len(items), CHUNK):
        yield items[start : start + CHUNK]


# Stores whose JSON may mention an id anywhere: (store, table, JSON column, row noun).
MENTION_STORES = (
    ("idempotency responses", "api_idempotencykey", "response_body", "stored response"),
    ("outbox", "derivations_outboxmessage", "payload", "outbox row"),
)
UUID_PATTERN = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
DIGEST_PATTERN = "[0-9a-f]{64}"


def _rows_mentioning(table: str, column: str, pattern: str, values: list[str]) -> list[Any]:
    """Ids of ``table``'s rows whose JSON ``column`` holds any of ``values`` (``pattern``
    tokens). Each token is extracted once and compared with the array: an alternation of an
    erasure's 100k ids as one regular expression would exceed PostgreSQL's limits."""
    if not values:
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT DISTINCT t.id FROM {table} AS t, "  # noqa: S608 (fixed names above)
            f"LATERAL regexp_matches(lower(t.{column}::text), %s, 'g') AS m "
            "WHERE m[1] = ANY(%s)",
            [f"({pattern})", values],
        )
        return [pk for (pk,) in cursor.fetchall()]


def _responses_with_content(pks: list[Any]) -> list[Any]:
    """Those of the stored API responses ``pks`` that hold more than ids: not a tombstone as a
    deletion leaves it, nor a memo of ids (a search's ``{"returned": [ids]}``; a batch write's
    ids, statuses and outcomes, apps.records.batch_api)."""
    kept: list[Any] = []
    for chunk in _chunks(pks):
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT id, response_body::text FROM api_idempotencykey WHERE id = ANY(%s)"
                " AND NOT (tombstone AND response_body = jsonb_build_object("
                "'id', resource_id, 'status', 'deleted', 'detail', %s::text))",
                [chunk, tombstone_body("")["detail"]],
            )
            kept += [
                pk
                for pk, body in cursor.fetchall()
                if not _only_ids(data := json.loads(body)) and not batch_memo_content_free(data)
            ]
    return kept


def _only_ids(data: Any) -> bool:
    if isinstance(data, dict):
        return all(_only_ids(value) for value in data.values())
    if isinstance(data, list):
        return all(_only_ids(item) for item in data)
    return isinstance(data, str) and re.fullmatch(UUID_PATTERN, data.lower()) is not None


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

    receipts = [receipt, *DeletionReceipt.objects.filter(parent=receipt)]
    record_ids = sorted({rid for r in receipts for rid in r.record_ids})
    fact_ids = sorted({str(r.fact_id) for r in receipts if r.fact_id})
    digests = sorted({r.content_digest for r in receipts if r.content_digest})
    result = Verification(record_ids=record_ids)

    def found(store: str, detail: str) -> None:
        result.residues.append(Residue(store, detail))

    for ids in _chunks(record_ids):
        # Whatever the deletion definition says goes with these versions (their full-text
        # entries live in their rows) and is still there.
        result.residues += [
            Residue(*r) for r in deletion.Plan(deleted={MemoryRecord: ids}).residues()
        ]
        for event in AuditEvent.objects.filter(object_id__in=ids).only("seq", "data"):
            members = _content_members(event.data)
            if members:
                found("audit payloads", f"event #{event.seq} carries {', '.join(members)}")
    for store, table, column, what in MENTION_STORES:
        mentioning = _rows_mentioning(table, column, UUID_PATTERN, record_ids)
        if table == IdempotencyKey._meta.db_table:
            mentioning = _responses_with_content(mentioning)
        for pk in mentioning:
            found(store, f"{what} {pk} names a deleted id")
    for pk in broker_messages_mentioning([*record_ids, *digests]):
        found("broker messages", f"broker message {pk} names a deleted id or digest")
    result.checked += [
        "records and versions",
        "full-text (records table)",
        "embeddings",
        "summaries",
        "outbox",
        "idempotency responses",
        "audit payloads",
        "broker messages",
    ]
    for ids in _chunks(fact_ids):
        # An expiry may leave a fact with versions that did not expire: it stays then.
        gone = [
            pk
            for pk in ids
            if receipt.kind != "expiry" or not MemoryRecord.objects.filter(fact_id=pk).exists()
        ]
        result.fact_ids += gone
        result.residues += [Residue(*r) for r in deletion.Plan(deleted={Fact: gone}).residues()]
    result.checked.append("facts")
    for chunk in _chunks(digests):
        for digest in Embedding.objects.filter(content_digest__in=chunk).values_list(
            "content_digest", flat=True
        ):
            found("embeddings", f"an embedding carries the content digest {digest[:12]}…")
    for pk in _rows_mentioning("api_idempotencykey", "response_body", DIGEST_PATTERN, digests):
        found("idempotency responses", f"stored response {pk} carries a deleted content digest")
    result.checked.append("content digest")
    result.residues += [Residue(*r) for r in _state_residues(receipt)]
    result.checked += ["runs", "episodes", "checkpoints", "obligation payloads"]
    return result


def replica_verify(alias: str, result: Verification) -> list[Residue]:
    """Read replica ``alias``'s copies of the primary's rows, searched for ``result``'s deleted
    versions and facts once it has replayed the deletion (it keeps them only until then)."""
    label = f"replica {alias}"
    try:
        if not replicas.replayed_now(alias, timeout=settings.REPLICA_MAX_LAG):
            return [
                Residue(label, f"has not replayed the deletion in {settings.REPLICA_MAX_LAG:g} s")
            ]
        found = []
        with replicas.replica_scope(alias):
            for ids in _chunks(result.record_ids):
                found += deletion.Plan(deleted={MemoryRecord: ids}).residues()
            for ids in _chunks(result.fact_ids):
                found += deletion.Plan(deleted={Fact: ids}).residues()
    except DatabaseError as exc:
        return [Residue(label, f"cannot be checked: {str(exc).strip().splitlines()[0]}")]
    return [Residue(f"{label}: {store}", detail) for store, detail in found]


def _state_residues(receipt: DeletionReceipt) -> list[tuple[str, str]]:
    """The state an erasure removed and left behind (apps.governance.state_erasure): by the
    ids its receipt keeps, and by the erased subject or owner, read back from the erasure's
    completion event."""
    if receipt.kind != "erasure":
        return []
    counts = receipt.counts if isinstance(receipt.counts, dict) else {}
    erased = counts.get("state_erased")
    erased = erased if isinstance(erased, dict) else {}
    selector = str(counts.get("selector", ""))
    value = erased_value(receipt, selector)
    found = state_residues(
        erased={name: [str(pk) for pk in erased.get(name, [])] for name in STATE_MODELS},
        selector=selector,
        value=value,
        digest=receipt.content_digest,
    )
    if selector in {"subject", "owner"} and not value:
        detail = f"no erasure.complete event names the erased {selector}: the erasure did not"
        found.insert(0, ("erasure", f"{detail} finish (its state was searched by tag only)"))
    return found


def erased_value(receipt: DeletionReceipt, selector: str) -> str:
    """The subject, owner or consent reference an erasure's receipt is about, as its
    ``erasure.complete`` audit event names it (the receipt keeps only its digest); "" when no
    such event names a value with the receipt's digest."""
    event = (
        AuditEvent.objects.filter(
            action="erasure.complete", object_type="deletion_receipt", object_id=str(receipt.pk)
        )
        .only("data")
        .first()
    )
    target = (
        event.data.get("target") if event is not None and isinstance(event.data, dict) else None
    )
    value = target.get(selector) if isinstance(target, dict) else None
    if not isinstance(value, str) or content_digest({selector: value}) != receipt.content_digest:
        return ""
    return value


def broker_messages_mentioning(needles: Iterable[str]) -> list[str]:
    """The ids of the current Celery app's SQL broker's stored (undelivered: delivered ones are
    purged, ``memoryconsole.celery``) messages whose body names any of ``needles``. kombu
    base64-encodes a body in its JSON envelope: it is decoded before it is searched. Other
    transports keep no store to inspect."""
    wanted = [needle for needle in needles if needle]
    url = str(current_app.conf.broker_url)
    transport = url.split("://", 1)[0].split("+", 1)[0]
    if not wanted or transport not in {"sqla", "sqlalchemy"}:
        return []
    found: list[str] = []
    with current_app.connection_for_write(url) as conn:
        channel: Any = conn.channel()
        try:
            message = channel.message_cls
            for pk, payload in channel.session.query(message.id, message.payload):
                text = str(payload)
                try:
                    envelope = json.loads(text)
                    body = envelope.get("body", "")
                    if envelope.get("properties", {}).get("body_encoding") == "base64":
                        body = base64.b64decode(body).decode("utf-8", "replace")
                    text = f"{text}\n{body}"
                except (ValueError, AttributeError, TypeError):
                    text = str(payload)  # not kombu's envelope: searched as stored
                if any(needle in text for needle in wanted):
                    found.append(str(pk))
        finally:
            channel.close()
    return found
