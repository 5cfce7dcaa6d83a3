"""Facts brought into a tenant from an export (``memoryconsole import``, apps/governance/
importer.py reads the file): each fact with every version as it was (value, content,
provenance, scope, trust, status, retention and expiry, redaction), its observations,
promotions, conflicts and promotion requests.

An import is a change like any other: it runs as the target tenant under row-level security
(the rows carry its ``tenant_id``, which the policies check), and every version it stores
appends a ``record.import`` event to the tenant's audit chain, as a write appends
``record.write``; each fact a ``fact.import``. The events of the source's chain about an item
are carried in its import event's ``data.origin.events`` as the export gave them (ids,
digests and hashes, never content), so the history stays readable, and verifiable against
the source's chain, while the target's chain links only its own events.

A fact the tenant already holds (same subject, key and scope) is refused: an import never
merges two histories of one fact.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.utils.dateparse import parse_datetime

from apps.audit.services import audit_record
from apps.core.actors import Actor
from apps.core.errors import DomainError
from apps.core.validation import parse_duration
from apps.tenancy.models import Tenant
from apps.work.outbox import record_embedding_enqueue

from .models import (
    Conflict,
    Fact,
    MemoryRecord,
    Observation,
    PromotionEvent,
    PromotionRequest,
    scope_canonical,
)
from .services import record_digest, scope_for

Line = Mapping[str, Any]
# The id an item gets in the target (the same one, or a new one with --remap-ids).
IdMap = Callable[[str], uuid.UUID]
# The source's audit events about the given ids (export lines, oldest first).
EventsAbout = Callable[[list[str]], list[dict[str, Any]]]


class ImportRefused(DomainError):
    """The file cannot be imported as it is; nothing was imported."""

    status = 422


@dataclass
class FactsImported:
    facts: int = 0
    versions: int = 0
    observations: int = 0
    promotion_events: int = 0
    conflicts: int = 0
    promotion_requests: int = 0


def _when(value: Any) -> datetime | None:
    if value is None:
        return None
    parsed = parse_datetime(str(value))
    if parsed is None:
        raise ValueError(f"not a timestamp: {str(value)[:40]!r}")
    return parsed


def _moment(value: Any) -> datetime:
    parsed = _when(value)
    if parsed is None:
        raise ValueError("a timestamp is missing")
    return parsed


def _actor(value: Any, prefix: str) -> dict[str, str]:
    actor = value or {}
    return {f"{prefix}_{part}": str(actor.get(part) or "") for part in ("type", "id", "label")}


def _source(source: Line) -> dict[str, str]:
    return {
        "source_kind": source["kind"],
        "source_ref": source["ref"],
        "source_turn_id": source.get("turn_id") or "",
        "source_tool_call_id": source.get("tool_call_id") or "",
        "source_run_id": source.get("run_id") or "",
    }


def _version(line: Line, *, tenant: Tenant, fact: Fact, current: str | None, ids: IdMap) -> Any:
    def pointer(value: Any) -> uuid.UUID | None:
        return ids(str(value)) if value else None

    scope, retention, redaction = line["scope"], line["retention"], line["redaction"]
    ttl = retention.get("ttl")
    ttl_requested = parse_duration(ttl) if ttl else None
    if ttl and ttl_requested is None:
        raise ValueError(f"retention.ttl is not a duration: {str(ttl)[:40]!r}")
    record = MemoryRecord(
        id=ids(line["id"]),
        tenant=tenant,
        fact=fact,
        subject=line["subject"],
        key=line["key"],
        version=int(line["version"]),
        value=line["value"],
        content=line["content"],
        **_source(line["source"]),
        **_actor(line["writer"], "writer"),
        observed_at=_moment(line["observed_at"]),
        written_at=_moment(line["written_at"]),
        owner=line["owner"],
        reason=line["reason"],
        scope_domain=scope["domain"],
        scope_task_type=scope.get("task_type") or "",
        scope_conditions=scope.get("conditions") or {},
        sensitivity=line["sensitivity"],
        retention_basis=retention["basis"],
        consent_ref=retention.get("consent_ref") or "",
        ttl_requested=ttl_requested,
        expires_at=_when(line.get("expires_at")),
        redaction_state=redaction["state"],
        redaction_fields=list(redaction.get("fields") or []),
        trust=line["trust"],
        status=line["status"],
        supersedes_id=pointer(line.get("supersedes")),
        superseded_by_id=pointer(line.get("superseded_by")),
        superseded_at=_when(line.get("superseded_at")),
        current_from=_when(line.get("current_from")),
        current_until=_when(line.get("current_until")),
        is_current=line["id"] == current,
    )
    observations = [
        Observation(
            id=ids(o["id"]),
            tenant=tenant,
            record=record,
            **_source(o["source"]),
            **_actor(o["writer"], "writer"),
            observed_at=_moment(o["observed_at"]),
            recorded_at=_moment(o["recorded_at"]),
            reason=o.get("reason") or "",
        )
        for o in line.get("observations") or []
    ]
    promotions = [
        PromotionEvent(
            id=ids(e["id"]),
            tenant=tenant,
            record=record,
            request_id=pointer(e.get("request")),
            **_actor(e["promoted_by"], "promoted_by"),
            evidence=e.get("evidence") or {},
            promoted_at=_moment(e["promoted_at"]),
        )
        for e in line.get("promotion_events") or []
    ]
    return record, observations, promotions


def _conflict(line: Line, *, tenant: Tenant, fact: Fact, ids: IdMap) -> Conflict:
    resolved = line.get("resolved_record")
    return Conflict(
        id=ids(line["id"]),
        tenant=tenant,
        fact=fact,
        current_record_id=ids(line["current"]),
        contender_id=ids(line["contender"]),
        state=line["state"],
        opened_at=_moment(line["opened_at"]),
        resolution=line.get("resolution") or "",
        resolved_record_id=ids(resolved) if resolved else None,
        **_actor(line.get("resolver"), "resolver"),
        reason=line.get("reason") or "",
        resolved_at=_when(line.get("resolved_at")),
    )


def _request(line: Line, *, tenant: Tenant, ids: IdMap) -> PromotionRequest:
    return PromotionRequest(
        id=ids(line["id"]),
        tenant=tenant,
        record_id=ids(line["record"]),
        evidence=line.get("evidence") or {},
        reason=line.get("reason") or "",
        **_actor(line["requested_by"], "requested_by"),
        requested_at=_moment(line["requested_at"]),
        state=line["state"],
        **_actor(line.get("decided_by"), "decided_by"),
        decided_at=_when(line.get("decided_at")),
        decision_reason=line.get("decision_reason") or "",
    )


def facts_held(facts: Sequence[Line]) -> list[str]:
    """Which of ``facts`` (export lines) the current tenant holds already, by identity
    (subject, key and scope), as ``subject key``."""
    wanted = {
        (f["subject"], f["key"], scope_canonical(**_scope_parts(f["scope"]))): f for f in facts
    }
    subjects = {subject for subject, _, _ in wanted}
    held = Fact.objects.filter(subject__in=subjects).values_list(
        "subject", "key", "scope__canonical"
    )
    return sorted(f"{s} {k}" for s, k, canonical in held if (s, k, canonical) in wanted)


def _scope_parts(scope: Line) -> dict[str, Any]:
    return {
        "domain": scope["domain"],
        "task_type": scope.get("task_type") or "",
        "conditions": scope.get("conditions") or {},
    }


def facts_import(
    *,
    tenant: Tenant,
    actor: Actor,
    facts: Sequence[Line],
    ids: IdMap,
    origin: Mapping[str, Any],
    events_about: EventsAbout,
) -> FactsImported:
    """Store ``facts`` (export ``fact`` lines) in the current tenant, which must be
    ``tenant``, in the caller's transaction; raises :class:`ImportRefused` for a fact the
    tenant holds already, or a line that is not a fact as the export writes it.

    ``ids`` gives each item's id in the tenant; ``origin`` (the source's tenant and export)
    and the source's events about each item (``events_about``) go into its import event."""
    held = facts_held(facts)
    if held:
        shown = ", ".join(held[:5]) + (" ..." if len(held) > 5 else "")
        raise ImportRefused(
            f"The tenant already holds {len(held)} of these facts ({shown}); an import does "
            "not merge histories. Nothing was imported."
        )
    done = FactsImported()
    new_facts: list[Fact] = []
    versions: list[MemoryRecord] = []
    observations: list[Observation] = []
    promotions: list[PromotionEvent] = []
    conflicts: list[Conflict] = []
    requests: list[PromotionRequest] = []
    embedded: list[MemoryRecord] = []
    for line in facts:
        try:
            scope = scope_for(tenant=tenant, **_scope_parts(line["scope"]))
            held_versions = line.get("versions") or []
            fact = Fact(
                id=ids(line["id"]),
                tenant=tenant,
                subject=line["subject"],
                key=line["key"],
                scope=scope,
                current_id=ids(line["current"]) if line.get("current") else None,
                last_version=max((int(v["version"]) for v in held_versions), default=0),
            )
            fact.created_at = _moment(line["created_at"])
            new_facts.append(fact)
            for version in held_versions:
                record, seen, promoted = _version(
                    version, tenant=tenant, fact=fact, current=line.get("current"), ids=ids
                )
                versions.append(record)
                observations.extend(seen)
                promotions.extend(promoted)
                if version.get("embeddings"):
                    embedded.append(record)
            conflicts.extend(
                _conflict(c, tenant=tenant, fact=fact, ids=ids) for c in line.get("conflicts") or []
            )
            requests.extend(
                _request(r, tenant=tenant, ids=ids) for r in line.get("promotion_requests") or []
            )
        except (KeyError, TypeError, ValueError, AttributeError) as problem:
            raise ImportRefused(
                f"Fact {str(line.get('id'))[:40]} is not as an export writes it "
                f"({type(problem).__name__}: {str(problem)[:100]}). Nothing was imported."
            ) from problem
    # created_at is stamped on insert (auto_now_add); each fact keeps its own.
    created = {fact.pk: fact.created_at for fact in new_facts}
    Fact.objects.bulk_create(new_facts, batch_size=500)
    for fact in new_facts:
        fact.created_at = created[fact.pk]
    Fact.objects.bulk_update(new_facts, ["created_at"], batch_size=500)
    MemoryRecord.objects.bulk_create(versions, batch_size=500)
    PromotionRequest.objects.bulk_create(requests, batch_size=500)
    Observation.objects.bulk_create(observations, batch_size=500)
    PromotionEvent.objects.bulk_create(promotions, batch_size=500)
    Conflict.objects.bulk_create(conflicts, batch_size=500)
    done.facts, done.versions, done.observations = len(new_facts), len(versions), len(observations)
    done.promotion_events, done.conflicts = len(promotions), len(conflicts)
    done.promotion_requests = len(requests)

    by_fact: dict[Any, list[MemoryRecord]] = {}
    for record in versions:
        by_fact.setdefault(record.fact_id, []).append(record)
    for line, fact in zip(facts, new_facts, strict=True):
        for record, version in zip(
            by_fact.get(fact.pk, []), line.get("versions") or [], strict=True
        ):
            audit_record(
                tenant=tenant,
                actor=actor,
                action="record.import",
                object_type="record",
                object_id=str(record.pk),
                digest=record_digest(record),
                data={
                    "version": record.version,
                    "fact": str(fact.pk),
                    "sensitivity": record.sensitivity,
                    "origin": {
                        **origin,
                        "id": version["id"],
                        "events": events_about([version["id"]]),
                    },
                },
                lane_key=str(fact.pk),
            )
        about = [
            line["id"],
            *(c["id"] for c in line.get("conflicts") or []),
            *(r["id"] for r in line.get("promotion_requests") or []),
        ]
        audit_record(
            tenant=tenant,
            actor=actor,
            action="fact.import",
            object_type="fact",
            object_id=str(fact.pk),
            data={
                "versions": [str(r.pk) for r in by_fact.get(fact.pk, [])],
                "origin": {**origin, "id": line["id"], "events": events_about(about)},
            },
            lane_key=str(fact.pk),
        )
    for record in embedded:
        # With the tenant's own model, by the worker after commit: an import may be large.
        record_embedding_enqueue(record)
    return done
