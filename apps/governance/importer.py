"""A ``memoryconsole.export/1`` file (docs/export.md) brought into a tenant of this or another
instance: ``memoryconsole import PATH --tenant SLUG [--remap-ids]``.

The file is read twice: first checked whole (a header of the format first, an ``end`` line
last whose counts match, every line JSON) while collecting its ids and the source's audit
events, then its facts stored ``CHUNK`` at a time (apps/records/importing.py), in one
transaction as the target tenant: whole or not at all. Ids are kept, so a memory has the same
id wherever it moves; an id taken on this instance refuses the import, and ``--remap-ids``
gives every item a new id, references included. Only facts come in, with their versions,
observations, promotions, conflicts and promotion requests: holds, runs, obligations,
summaries (derived: made again) and receipts are counted and left out.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.db import IntegrityError, connection
from django.db.models import Model

from apps.audit.services import audit_record
from apps.core.actors import Actor
from apps.records.importing import FactsImported, ImportRefused, facts_import
from apps.records.models import (
    Conflict,
    Fact,
    MemoryRecord,
    Observation,
    PromotionEvent,
    PromotionRequest,
)
from apps.tenancy.context import tenant_scope
from apps.tenancy.models import Tenant

from .export import LINE_TYPES, SCHEMA

# Facts stored per call: bounds memory and the statements' sizes.
CHUNK = 200
# Line types whose items are not imported (module docstring).
LEFT_OUT = ("legal_hold", "run", "obligation", "summary", "deletion_receipt")


@dataclass
class ImportSummary:
    """What an import stored, and what the file held that it left out."""

    source_tenant: str
    imported: FactsImported
    left_out: dict[str, int]
    remapped: bool


@dataclass
class _Survey:
    header: dict[str, Any]
    counts: Counter[str]
    ids: dict[type[Model], list[str]]
    events: dict[str, list[dict[str, Any]]]
    digest: str


def _lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    with path.open("rb") as source:
        for number, raw in enumerate(source, 1):
            if not raw.strip():
                continue
            try:
                line = json.loads(raw)
            except (ValueError, UnicodeDecodeError) as problem:
                raise ImportRefused(f"Line {number} is not JSON: {problem}.") from problem
            if not isinstance(line, dict) or line.get("type") not in LINE_TYPES:
                raise ImportRefused(f"Line {number} is no line of {SCHEMA} (no known type).")
            yield number, line


def _survey(path: Path) -> _Survey:
    """The file checked whole, with the ids it holds and the source's audit events by the id
    of what they are about."""
    header: dict[str, Any] | None = None
    end: dict[str, Any] | None = None
    counts: Counter[str] = Counter()
    ids: dict[type[Model], list[str]] = defaultdict(list)
    events: dict[str, list[dict[str, Any]]] = defaultdict(list)
    digest = hashlib.sha256()
    with path.open("rb") as source:
        for chunk in iter(lambda: source.read(1 << 20), b""):
            digest.update(chunk)
    for number, line in _lines(path):
        kind = line["type"]
        if end is not None:
            raise ImportRefused(f"Line {number} follows the end line.")
        if header is None:
            if kind != "header" or line.get("schema") != SCHEMA:
                raise ImportRefused(
                    f"Not a {SCHEMA} file: its first line is no header of that format "
                    "(memoryconsole export writes one)."
                )
            header = line
            continue
        if kind == "end":
            end = line
        elif kind == "fact":
            counts["fact"] += 1
            ids[Fact].append(str(line.get("id")))
            for version in line.get("versions") or []:
                counts["record"] += 1
                ids[MemoryRecord].append(str(version.get("id")))
                ids[Observation].extend(str(o.get("id")) for o in version.get("observations") or [])
                ids[PromotionEvent].extend(
                    str(e.get("id")) for e in version.get("promotion_events") or []
                )
            ids[Conflict].extend(str(c.get("id")) for c in line.get("conflicts") or [])
            ids[PromotionRequest].extend(
                str(r.get("id")) for r in line.get("promotion_requests") or []
            )
        else:
            counts[kind] += 1
            if kind == "audit_event":
                about = str((line.get("object") or {}).get("id") or "")
                events[about].append({k: v for k, v in line.items() if k != "type"})
    if header is None:
        raise ImportRefused(f"The file is empty: not a {SCHEMA} file.")
    if end is None:
        raise ImportRefused(
            "The file has no end line: the export was cut off. Export again; nothing was imported."
        )
    expected = {kind: n for kind, n in (end.get("counts") or {}).items() if n}
    if expected != {kind: n for kind, n in counts.items() if n}:
        raise ImportRefused(
            f"The end line counts {expected}, the file holds {dict(counts)}: it was changed "
            "after the export. Nothing was imported."
        )
    return _Survey(header, counts, ids, events, digest.hexdigest())


def _id_check(ids: dict[type[Model], list[str]]) -> None:
    """Refuse what is not an id, and ids this tenant holds already (run as the tenant)."""
    for model, values in ids.items():
        for value in values:
            try:
                uuid.UUID(value)
            except ValueError as problem:
                raise ImportRefused(
                    f"{value[:40]!r} is not an id ({model.__name__}): the file was changed "
                    "after the export. Nothing was imported."
                ) from problem
        held = model._default_manager.filter(pk__in=values).count()
        if held:
            raise ImportRefused(
                f"This tenant already holds {held} {model.__name__} ids of the file: was it "
                "imported before? Import with --remap-ids to give every item a new id. Nothing "
                "was imported."
            )


TAKEN = (
    "The file's ids are taken on this instance (by another tenant: the file comes from a "
    "tenant of this instance, or was imported into one). Import with --remap-ids to give "
    "every item a new id. Nothing was imported."
)


def import_file(path: Path, *, tenant: Tenant, actor: Actor, remap_ids: bool) -> ImportSummary:
    """Import the export at ``path`` into ``tenant``, whole or not at all; raises
    :class:`ImportRefused` saying why not."""
    survey = _survey(path)
    mapping: dict[str, str] = {}

    def new_id(old: str) -> uuid.UUID:
        if not remap_ids:
            return uuid.UUID(old)
        if old not in mapping:
            mapping[old] = str(uuid.uuid4())
        return uuid.UUID(mapping[old])

    def events_about(ids: list[str]) -> list[dict[str, Any]]:
        found = [event for item in ids for event in survey.events.get(item, [])]
        return sorted(found, key=lambda event: event.get("seq") or 0)

    origin = {name: survey.header.get(name) for name in ("tenant", "exported_at")}
    imported = FactsImported()
    try:
        with tenant_scope(tenant.pk):
            if not remap_ids:
                _id_check(survey.ids)
            chunk: list[dict[str, Any]] = []
            for _, line in _lines(path):
                if line["type"] == "fact":
                    chunk.append(line)
                if len(chunk) == CHUNK or (line["type"] == "end" and chunk):
                    done = facts_import(
                        tenant=tenant,
                        actor=actor,
                        facts=chunk,
                        ids=new_id,
                        origin=origin,
                        events_about=events_about,
                    )
                    for name, count in vars(done).items():
                        setattr(imported, name, getattr(imported, name) + count)
                    chunk = []
            left_out = {kind: survey.counts[kind] for kind in LEFT_OUT if survey.counts[kind]}
            audit_record(
                tenant=tenant,
                actor=actor,
                action="tenant.import",
                object_type="tenant",
                object_id=str(tenant.pk),
                digest=survey.digest,
                data={
                    "origin": {**origin, "subject": survey.header.get("subject")},
                    "schema": SCHEMA,
                    "remapped_ids": remap_ids,
                    "imported": vars(imported),
                    "left_out": left_out,
                },
            )
            with connection.cursor() as cursor:
                # Every reference checked now, inside the import, not at a caller's commit.
                cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    except IntegrityError as error:
        raise _refusal(error) from error
    return ImportSummary(str(survey.header.get("tenant")), imported, left_out, remap_ids)


def _refusal(error: IntegrityError) -> ImportRefused:
    constraint = getattr(getattr(error.__cause__, "diag", None), "constraint_name", "") or ""
    if constraint.endswith("_pkey"):
        return ImportRefused(TAKEN)
    return ImportRefused(
        f"The file's items do not fit together ({constraint or error}): it was changed after "
        "the export. Nothing was imported."
    )
