"""A record's deletion: a fact's versions purged through the one deletion statement (the
relation graph's, :mod:`apps.core.deletion`), with the receipt, the erasure ledger's entry and
the audit event that answer for it; and expiry's compaction, which purges what has expired.

Apart from the write path (:mod:`apps.records.services`) because it is another job: it runs
for ``DELETE /records/{id}``, for erasures and for expiry, and refuses what a hold keeps."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from apps.audit.models import DeletionReceipt
from apps.audit.services import (
    audit_append,
    audit_event,
    content_digest,
    erasure_ledger_entry,
    subject_digest,
)
from apps.core import deletion
from apps.core.actors import Actor
from apps.core.database import insert_clause
from apps.tenancy.context import GENERIC_PLAN_SQL, prepared_cursor

from .models import (
    Fact,
    LegalHold,
    MemoryRecord,
)
from .predicates import record_predicate_sql
from .services import RecordError, _loaded, record_digest


class Held(RecordError):
    """A legal hold keeps the record; it cannot be deleted or expire until the hold is lifted."""

    status = 409


@dataclass
class DeletionResult:
    receipt: Any
    record_ids: list[str]


def fact_is_held(fact: Fact) -> bool:
    return LegalHold.objects.active().covering(subject=fact.subject, fact=fact).exists()


LOCK_FACT_FOR_DELETE_SQL = (
    "SELECT id, tenant_id, subject, key FROM records_fact WHERE id = %(fact)s FOR UPDATE"
)


# Every version of a fact, locked, with whether an active legal hold covers it: the columns
# a deletion's receipt and digest read. ``MemoryRecord.objects.filter(fact_id=...)
# .annotate(held=record_held()).only(...).order_by("version").select_for_update(of=("self",))``
# as one statement with the held predicate's compiled clause (apps.records.predicates): the
# queryset cost more to build than the statement to run (docs/performance.md, "Request path").
VERSIONS_FOR_DELETE_SQL = (
    "SELECT r.id, r.fact_id, r.subject, r.key, r.value, r.content, r.written_at, "  # noqa: S608 (a model's table)
    f"{{held}} AS held FROM {MemoryRecord._meta.db_table} r"
    " WHERE r.fact_id = %(fact)s ORDER BY r.version FOR UPDATE OF r"
)
_VALUE = MemoryRecord._meta.get_field("value")
_VALUE_COLUMN = _VALUE.get_col(MemoryRecord._meta.db_table)


def versions_for_delete_sql(params: dict[str, Any]) -> str:
    """:data:`VERSIONS_FOR_DELETE_SQL` for the fact ``params["fact"]`` (its held predicate's
    parameters added to ``params``); its rows are read by :func:`versions_loaded`."""
    return VERSIONS_FOR_DELETE_SQL.format(held=record_predicate_sql("held", "r", params))


def versions_loaded(rows: list[tuple[Any, ...]]) -> list[MemoryRecord]:
    """The rows of :data:`VERSIONS_FOR_DELETE_SQL` as the ORM loads them (``Model.from_db``,
    the value through its field's ``from_db_value``), each with its ``held``."""
    versions = []
    for pk, fact_id, subject, key, value, content, written_at, held in rows:
        version = _loaded(
            MemoryRecord,
            id=pk,
            fact_id=fact_id,
            subject=subject,
            key=key,
            value=_VALUE.from_db_value(value, _VALUE_COLUMN, connection),
            content=content,
            written_at=written_at,
        )
        version.held = held  # type: ignore[attr-defined]
        versions.append(version)
    return versions


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
    #
    # The deletion statement's generic plan (apps.tenancy.context), the fact's lock, then
    # every version of the fact, locked, with whether an active legal hold covers it. The
    # versions' read is a statement of its own, with its own snapshot, run once the lock is
    # taken: a hold placed on the fact meanwhile holds a key-share lock on it until it
    # commits, so it is seen there. Where parameters are bound on the client (Django's
    # default), the three go as one query string, which the server runs in order: one round
    # trip instead of three.
    params: dict[str, Any] = {"fact": record.fact_id}
    versions_sql = versions_for_delete_sql(params)
    with connection.cursor() as cursor:
        if connection.settings_dict["OPTIONS"].get("server_side_binding"):
            cursor.execute(GENERIC_PLAN_SQL)
            cursor.execute(LOCK_FACT_FOR_DELETE_SQL, params)
        else:
            cursor.execute(
                f"{GENERIC_PLAN_SQL}; {LOCK_FACT_FOR_DELETE_SQL}; {versions_sql}", params
            )
            cursor.nextset()
        row = cursor.fetchone()
        if row is None:
            raise Fact.DoesNotExist("No such fact in this tenant.")
        fact = _loaded(Fact, id=row[0], tenant_id=row[1], subject=row[2], key=row[3])
        if connection.settings_dict["OPTIONS"].get("server_side_binding"):
            cursor.execute(versions_sql, params)
        else:
            cursor.nextset()
        versions = versions_loaded(cursor.fetchall())
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
            generic_plan_set=True,
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
    generic_plan_set: bool = False,
) -> DeletionResult:
    """Delete ``versions`` (locked) of the locked ``fact`` (the fact itself with
    ``whole_fact``) with everything the deletion definition (:mod:`apps.core.deletion`) says
    goes with them (observations, promotion history, conflicts, embeddings, citing summaries
    invalidated, queued work and stored responses), in one statement. Receipt and audit keep
    ids, counts and a digest."""

    pks = [v.pk for v in versions]
    record_ids = [str(pk) for pk in pks]
    digest = content_digest([record_digest(v) for v in versions])
    now = timezone.now()
    purge = versions_purge(
        record_ids=pks,
        fact_ids=[fact.pk] if whole_fact else [],
        reason=f"source {kind}: {reason}",
        now=now,
        generic_plan_set=generic_plan_set,
    )
    counts = purge.counts()
    receipt = DeletionReceipt(
        tenant_id=fact.tenant_id,
        kind=kind,
        **actor.fields("requested_by"),
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
    inserts = [insert_clause(receipt)]
    if kind != "expiry":
        # An expired version stays hidden by the read-time predicate after a restore, and
        # compaction removes it again; a deletion asked for must be re-applied.
        entry = erasure_ledger_entry(
            tenant_id=fact.tenant_id,
            kind="deletion",
            target={"facts": [fact.pk] if whole_fact else [], "records": record_ids},
            reason=reason,
            reference=str(receipt.pk),
        )
        inserts.append(insert_clause(entry))
    # The event, the receipt, the ledger entry and the invalidated summaries naming the
    # event: one statement, one round trip.
    audit_append(event, alongside=[*inserts, *purge.stamp_statements(event.pk)])
    return DeletionResult(receipt=receipt, record_ids=record_ids)


def versions_purge(
    *,
    record_ids: list[Any],
    fact_ids: list[Any],
    reason: str,
    now: datetime,
    generic_plan_set: bool = False,
) -> deletion.Outcome:
    """Delete the (locked) versions ``record_ids`` and the whole facts ``fact_ids`` with
    everything the deletion definition says, in the current tenant: the one statement every
    deletion path runs (``record_delete``, expiry compaction, erasure batches), prepared on
    the server and planned once per database session (:mod:`apps.tenancy.context`: the
    policies read the tenant at run time, so one plan serves every tenant, for one fact or an
    erasure's batch). ``reason`` is written on the summaries it invalidates.

    The caller locks the versions first (``FOR UPDATE``): a summary being written about one
    of them locks its sources, so it either commits before the statement's snapshot (and is
    invalidated) or waits and then finds its source gone. ``generic_plan_set``: the caller
    ran :data:`~apps.tenancy.context.GENERIC_PLAN_SQL` in this transaction already."""
    with prepared_cursor(generic_plan=not generic_plan_set) as cursor:
        return deletion.run(
            deleted={MemoryRecord: record_ids, Fact: fact_ids},
            now=now,
            reason=reason,
            cursor=cursor,
        )


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
