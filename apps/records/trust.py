"""Decision-time trust: what an agent needs besides a version's value to know whether it may
act on it. Whether the version takes part in an open conflict, and who confirmed it.

Every read an agent decides on (search hits, ``/facts``, ``/facts/check``) calls
:func:`decision_trust_annotate` on the versions it returns, so they all say the same, in two
queries whatever the number of versions.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection
from rest_framework import serializers

from apps.core.actors import ActorType
from apps.tenancy.context import id_array

from .models import Conflict, ConflictState, MemoryRecord, PromotionEvent, Trust


class ConfirmedByKind:
    PERSON = "person"
    CREDENTIAL = "credential"
    # The system promoted on a second independent observation (the tenant's
    # auto_promote_on_second_observation): no one approved it, two sources agreed.
    OBSERVATION = "observation"


KIND_OF_PROMOTER: dict[str, str] = {
    ActorType.USER.value: ConfirmedByKind.PERSON,
    ActorType.CREDENTIAL.value: ConfirmedByKind.CREDENTIAL,
    ActorType.SYSTEM.value: ConfirmedByKind.OBSERVATION,
}


@dataclass(frozen=True)
class Confirmation:
    """Who confirmed a version: its latest promotion event.

    ``id`` is the person's or the credential's id; for an observation, the id of the
    observation that corroborated the value."""

    kind: str
    id: str
    label: str
    at: datetime
    promotion_event: uuid.UUID


def _confirmation(event: PromotionEvent) -> Confirmation:
    kind = KIND_OF_PROMOTER.get(event.promoted_by_type, ConfirmedByKind.OBSERVATION)
    actor_id = event.promoted_by_id
    if kind == ConfirmedByKind.OBSERVATION:
        observations = (event.evidence or {}).get("observations") or [""]
        actor_id = str(observations[-1])
    return Confirmation(
        kind=kind,
        id=actor_id,
        label=event.promoted_by_label,
        at=event.promoted_at,
        promotion_event=event.pk,
    )


# The current tenant's open conflicts with a side among the ids (row-level security applies),
# oldest first: ``Conflict.objects.filter(state=OPEN).filter(Q(current_record_id__in=ids) |
# Q(contender_id__in=ids)).order_by("opened_at", "id")``.
OPEN_CONFLICTS_SQL = (
    f"SELECT id, current_record_id, contender_id FROM {Conflict._meta.db_table}"  # noqa: S608 (a model's table)
    " WHERE state = %s AND (current_record_id = ANY(%s::uuid[]) OR contender_id = ANY(%s::uuid[]))"
    " ORDER BY opened_at, id"
)


def open_conflict_sql(record_column: str) -> str:
    """A boolean SQL expression: whether the record whose id is ``record_column`` is a side of
    an open conflict, before its sides' liveness (:func:`open_conflicts_of` decides that).
    A statement that returns records computes it alongside them: where it is false for every
    record, none is in a conflict, and :func:`decision_trust_annotate` is told so
    (``conflicts_checked``) instead of looking."""
    return (
        f"EXISTS (SELECT 1 FROM {Conflict._meta.db_table} c"  # noqa: S608 (a model's table)
        f" WHERE c.state = '{ConflictState.OPEN.value}'"
        f" AND (c.current_record_id = {record_column} OR c.contender_id = {record_column}))"
    )


def open_conflicts_of(record_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, uuid.UUID]:
    """For each of ``record_ids`` in an open conflict, that conflict's id. A conflict counts
    while both its versions are live, as the review queue shows it
    (``apps.review.selectors.conflicts``): one whose other side has expired is moot, and no
    reviewer is asked to resolve it."""
    ids = list(record_ids)
    if not ids:
        return {}
    found: dict[uuid.UUID, uuid.UUID] = {}
    # The open conflicts first, then whether both sides of those are live: most reads (every
    # search) find none, and the liveness predicate costs more to build than the lookup does
    # to run. The lookup is one fixed statement: the ORM took longer to build it than the
    # database to answer it (docs/performance.md, "Request path"); a test holds it to the
    # queryset it replaces.
    with connection.cursor() as cursor:
        cursor.execute(OPEN_CONFLICTS_SQL, [ConflictState.OPEN, id_array(ids), id_array(ids)])
        rows = cursor.fetchall()
    if not rows:
        return {}
    sides = {side for _pk, current_id, contender_id in rows for side in (current_id, contender_id)}
    live = set(MemoryRecord.objects.live().filter(pk__in=sides).values_list("pk", flat=True))
    wanted = set(ids)
    for conflict_id, current_id, contender_id in rows:
        if current_id not in live or contender_id not in live:
            continue
        for record_id in (current_id, contender_id):
            if record_id in wanted:
                found.setdefault(record_id, conflict_id)
    return found


def confirmations_of(record_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, Confirmation]:
    """For each confirmed record of ``record_ids``, its latest promotion (a version returned
    to provisional and approved again was confirmed by the second approval)."""
    ids = list(record_ids)
    if not ids:
        return {}
    events = (
        PromotionEvent.objects.filter(record_id__in=ids)
        .order_by("record_id", "-promoted_at", "-id")
        .distinct("record_id")
    )
    return {event.record_id: _confirmation(event) for event in events}


def decision_trust_annotate(
    records: Iterable[MemoryRecord], *, conflicts_checked: bool = False
) -> None:
    """Set ``open_conflict_id`` (read by ``RecordSerializer``'s ``conflict``) and
    ``confirmation`` on each record. ``conflicts_checked``: the statement that loaded the
    records found none of them a side of an open conflict (:func:`open_conflict_sql`)."""
    records = list(records)
    conflicts = {} if conflicts_checked else open_conflicts_of(r.pk for r in records)
    confirmed = confirmations_of(r.pk for r in records if r.trust == Trust.CONFIRMED)
    for record in records:
        record.open_conflict_id = conflicts.get(record.pk)  # type: ignore[attr-defined]
        record.confirmation = (  # type: ignore[attr-defined]
            confirmed.get(record.pk) if record.trust == Trust.CONFIRMED else None
        )


def confirmed_by_json(confirmation: Confirmation | None) -> dict[str, Any] | None:
    """The ``confirmed_by`` member of an item (null for a provisional version)."""
    if confirmation is None:
        return None
    return {
        "kind": confirmation.kind,
        "id": confirmation.id,
        "label": confirmation.label,
        "at": serializers.DateTimeField().to_representation(confirmation.at),
        "promotion_event": str(confirmation.promotion_event),
    }


class UnsafeReason:
    """Why a version is not safe to act on (``/facts/check``'s ``unsafe_reasons``)."""

    NOT_FOUND = "not_found"
    STALE = "stale"
    IN_CONFLICT = "in_conflict"
    PROVISIONAL = "provisional"
