"""What an erasure by subject or owner does to the state layer (in ``erasure_run``'s transaction).

* Runs about the subject (``Run.subject``) or owned by the owner go with their episodes and
  checkpoints; summaries citing those episodes become invalid, as when a run closes.
* An erasure by subject also takes every episode (``content``, ``content_ref``) and checkpoint
  (``state``) that *mentions* the subject, in any run: an agent that left ``subject`` empty
  still wrote the person into its traces. The run stays, with its other traces.
* Obligations about or mentioning the subject lose payload, result and subject; key and state
  stay, so a retry with the key still finds it and the work stays done exactly once.
* Stored API responses describing any of these are forgotten (they repeat their content).

A mention is the identifier as a whole word in any letter case (:func:`mention_pattern`):
``user:1`` is in ``"User:1 said"``, not in ``user:12`` or ``superuser:1``. Identifiers the
agent chose (a task id, an obligation's key) are not searched: they name the work. What goes
with a run and what stripping means are the deletion definition's (:mod:`apps.core.deletion`);
the erasure, its dry run and its verification read one selection (:func:`state_plan`).
Runs and obligations name no consent: an erasure by consent reference touches no state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db.models import Model, Q, QuerySet, TextField
from django.db.models.functions import Cast
from django.utils import timezone

from apps.audit.services import content_digest
from apps.core import deletion
from apps.state.models import Checkpoint, Episode, Obligation, Run

# What an erasure takes from the state layer, by the names its receipt keeps their ids under
# (runs, episodes and checkpoints are deleted, obligations withdrawn).
STATE_MODELS: dict[str, type[Model]] = {
    "runs": Run,
    "episodes": Episode,
    "checkpoints": Checkpoint,
    "obligations": Obligation,
}
# The totals an erasure reports for the state layer, under the definition's names.
STATE_TOTALS = tuple(deletion.rules_of(model).counted_as for model in STATE_MODELS.values())


@dataclass
class StateErasure:
    """What the erasure removed from the state layer, and the ids (by ``STATE_MODELS``' names)
    its receipt keeps: episodes and checkpoints taken for a mention, beside the runs'."""

    counts: dict[str, int]
    ids: dict[str, list[str]]


# What separates a word from an identifier (apps.records.validation.IDENTIFIER: whitespace,
# control characters, quotes, brackets and separators), as a bracket expression of
# PostgreSQL's regular expressions.
_SEPARATOR = r"[[:space:][:cntrl:]\"'`<>(){}\[\]\\,;|!?*#%&^~$]"


def mention_pattern(subject: str) -> str:
    """A PostgreSQL regular expression (matched with ``~*``, in any letter case) finding
    ``subject`` as a whole word: between separators or the ends of the text, a trailing ``.``
    or ``:`` allowed (``user:1.`` ends a sentence; ``user:1.5`` is another identifier)."""
    # Backslash before a character that is not a letter or a digit makes it literal.
    escaped = "".join(
        char if char.isalnum() or not char.isascii() else "\\" + char for char in subject
    )
    return f"(^|{_SEPARATOR}){escaped}[.:]*($|{_SEPARATOR})"


def mentioning(rows: QuerySet[Any], fields: Sequence[str], subject: str) -> QuerySet[Any]:
    """The primary keys of ``rows`` whose ``fields`` (text, or JSON read as its text) mention
    ``subject`` (:func:`mention_pattern`)."""
    pattern = mention_pattern(subject)
    rows = rows.alias(**{f"{name}_text": Cast(name, output_field=TextField()) for name in fields})
    condition = Q()
    for name in fields:
        # The substring test is the cheap filter; the expression keeps whole words only.
        condition |= Q(**{f"{name}_text__icontains": subject, f"{name}_text__iregex": pattern})
    return rows.filter(condition).values("pk")


def _selection(selector: str, value: str) -> dict[str, QuerySet[Any]]:
    """The rows an erasure by ``selector = value`` takes from the state layer (module doc)."""
    chosen: dict[str, QuerySet[Any]] = {
        name: model._default_manager.none() for name, model in STATE_MODELS.items()
    }
    if selector == "owner":
        chosen["runs"] = Run.objects.filter(owner=value)
    elif selector == "subject":
        chosen["runs"] = Run.objects.filter(subject=value)
        chosen["episodes"] = Episode.objects.filter(
            pk__in=mentioning(Episode.objects.all(), ("content", "content_ref"), value)
        )
        chosen["checkpoints"] = Checkpoint.objects.filter(
            pk__in=mentioning(Checkpoint.objects.all(), ("state",), value)
        )
        chosen["obligations"] = Obligation.objects.filter(
            Q(subject=value)
            | Q(pk__in=mentioning(Obligation.objects.all(), ("payload", "result"), value))
        )
    return chosen


def _plan(rows: dict[str, Any]) -> deletion.Plan:
    """Deleting the runs, episodes and checkpoints ``rows`` names (by ``STATE_MODELS``' names),
    withdrawing its obligations."""
    return deletion.Plan(
        deleted=_deleted(rows), withdrawn={Obligation: rows.get("obligations", ())}
    )


def _deleted(rows: dict[str, Any]) -> dict[type[Model], Any]:
    return {STATE_MODELS[name]: rows.get(name, ()) for name in ("runs", "episodes", "checkpoints")}


def state_plan(selector: str, value: str) -> deletion.Plan:
    """What an erasure by ``selector = value`` would do to the state layer now: its counts
    are the dry run's, its residues what a finished erasure should have left none of."""
    chosen = _selection(selector, value)
    return _plan({name: rows.values("pk") for name, rows in chosen.items()})


def state_erasure_counts(*, selector: str, value: str) -> dict[str, int]:
    """What :func:`state_erase` would remove now (a dry run: nothing changes)."""
    counts = state_plan(selector, value).counts()
    return {name: counts.get(name, 0) for name in STATE_TOTALS}


def state_erase(*, selector: str, value: str, reason: str) -> StateErasure:
    """Erase the state matching ``selector = value`` (see the module doc), in the caller's
    transaction, locking what it changes. Returns the counts (summaries and embeddings it
    invalidated included) and the ids."""
    ids = {
        name: [
            str(pk)
            for pk in rows.select_for_update(no_key=name == "obligations").values_list(
                "pk", flat=True
            )
        ]
        for name, rows in _selection(selector, value).items()
    }
    outcome = deletion.run(
        deleted=_deleted(ids),
        withdrawn={Obligation: ids["obligations"]},
        now=timezone.now(),
        reason=f"source erased: {reason}",
    )
    counts = outcome.counts()
    reported = (*STATE_TOTALS, "summaries_invalidated", "embeddings", "stored_responses")
    return StateErasure(counts={name: counts.get(name, 0) for name in reported}, ids=ids)


def state_residues(
    *, erased: dict[str, list[str]], selector: str, value: str, digest: str
) -> list[tuple[str, str]]:
    """``(store, detail)`` for each piece of state an erasure should have removed and did not:
    what deleting and stripping the ids its receipt keeps (``erased``) would still change;
    with the erased ``value`` known, whatever an erasure by it would reach now; without it,
    any run or obligation whose subject (or run whose owner) has the erasure's digest."""
    found = _plan(erased).residues()
    if selector not in {"subject", "owner"}:
        return found
    if value:
        return list(dict.fromkeys([*found, *state_plan(selector, value).residues()]))
    if not digest:
        return found
    stores: list[tuple[str, QuerySet[Any]]] = [("runs", Run.objects.exclude(**{selector: ""}))]
    if selector == "subject":
        # A stripped obligation loses its subject too: one still naming it is a residue.
        stores.append(("obligations", Obligation.objects.exclude(subject="")))
    for store, rows in stores:
        # A digest cannot be searched for; each distinct value is digested once instead.
        values = rows.values_list(selector, flat=True).distinct()
        matching = [v for v in values if content_digest({selector: v}) == digest]
        for pk in rows.filter(**{f"{selector}__in": matching}).values_list("pk", flat=True):
            found.append((store, f"{store[:-1]} {pk} is about the erased {selector}"))
    return found
