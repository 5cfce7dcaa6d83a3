"""What an erasure by subject or owner does to the state layer (called by
``apps.governance.erasure.erasure_run``, in its transaction).

* Runs about the subject (``Run.subject``), or owned by the owner, go with their episodes and
  checkpoints; summaries citing those episodes become invalid, as when a run closes.
* Obligations about the subject (``Obligation.subject``; obligations have no owner) lose their
  payload and result. Their key and state stay: a retry with the key still finds the
  obligation and a second commit is still refused, so the work stays done exactly once.
* Stored API responses describing any of these are forgotten (they repeat their content).

What goes with a run and what stripping an obligation means are the deletion definition's
(:mod:`apps.core.deletion`: runs are deleted, obligations withdrawn). An erasure by consent
reference touches no state: runs and obligations name no consent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from apps.audit.services import content_digest
from apps.core import deletion
from apps.state.models import Checkpoint, Episode, Obligation, Run

# The totals an erasure reports for the state layer, under the definition's names.
STATE_TOTALS = tuple(
    deletion.rules_of(model).counted_as for model in (Run, Episode, Checkpoint, Obligation)
)


@dataclass
class StateErasure:
    """What the erasure removed from the state layer, and the ids a receipt keeps."""

    counts: dict[str, int] = field(default_factory=dict)
    run_ids: list[str] = field(default_factory=list)
    obligation_ids: list[str] = field(default_factory=list)


def runs_matching(selector: str, value: str) -> QuerySet[Run]:
    if selector == "subject":
        return Run.objects.filter(subject=value)
    if selector == "owner":
        return Run.objects.filter(owner=value)
    return Run.objects.none()


def obligations_matching(selector: str, value: str) -> QuerySet[Obligation]:
    if selector == "subject":
        return Obligation.objects.filter(subject=value)
    return Obligation.objects.none()


def _plan(runs: Any, obligations: Any) -> deletion.Plan:
    return deletion.Plan(deleted={Run: runs}, withdrawn={Obligation: obligations})


def state_erasure_counts(*, selector: str, value: str) -> dict[str, int]:
    """What :func:`state_erase` would remove now (a dry run: nothing changes)."""
    counts = _plan(
        runs_matching(selector, value).values("pk"),
        obligations_matching(selector, value).values("pk"),
    ).counts()
    return {name: counts.get(name, 0) for name in STATE_TOTALS}


def state_erase(*, selector: str, value: str, reason: str) -> StateErasure:
    """Erase the state matching ``selector = value`` (see the module doc), in the caller's
    transaction, locking what it changes. Returns the counts (summaries and embeddings it
    invalidated included) and the ids of the runs and obligations."""
    run_ids = list(runs_matching(selector, value).select_for_update().values_list("pk", flat=True))
    obligation_ids = list(
        obligations_matching(selector, value)
        .select_for_update(no_key=True)
        .values_list("pk", flat=True)
    )
    outcome = _plan(run_ids, obligation_ids).execute(
        now=timezone.now(), reason=f"source erased: {reason}"
    )
    counts = outcome.counts()
    return StateErasure(
        counts={
            **{name: counts.get(name, 0) for name in STATE_TOTALS},
            "summaries_invalidated": counts.get("summaries_invalidated", 0),
            "embeddings": counts.get("embeddings", 0),
            "stored_responses": counts.get("stored_responses", 0),
        },
        run_ids=[str(pk) for pk in run_ids],
        obligation_ids=[str(pk) for pk in obligation_ids],
    )


def state_residues(
    *, run_ids: list[str], obligation_ids: list[str], digest: str, selector: str
) -> list[tuple[str, str]]:
    """``(store, detail)`` for each piece of state an erasure should have removed and did not:
    whatever the deletion of the runs it erased and the withdrawal of the obligations it
    stripped would still change (:meth:`apps.core.deletion.Plan.residues`), and any run or
    obligation whose subject (or a run whose owner) has the erasure's content digest
    (``content_digest({selector: value})``)."""

    found = _plan(run_ids, obligation_ids).residues()
    if not digest or selector not in {"subject", "owner"}:
        return found
    stores: list[tuple[str, QuerySet[Any]]] = [("runs", Run.objects.exclude(**{selector: ""}))]
    if selector == "subject":
        stores.append(
            (
                "obligations",
                Obligation.objects.exclude(subject="").exclude(payload={}, result__isnull=True),
            )
        )
    for store, rows in stores:
        # A digest cannot be searched for; each distinct value is digested once instead.
        values = rows.values_list(selector, flat=True).distinct()
        erased = [v for v in values if content_digest({selector: v}) == digest]
        for pk in rows.filter(**{f"{selector}__in": erased}).values_list("pk", flat=True):
            found.append((store, f"{store[:-1]} {pk} is about the erased {selector}"))
    return found
