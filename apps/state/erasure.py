"""What an erasure by subject or owner does to the state layer (called by
``apps.derivations.erasure.erasure_run``, in its transaction).

* Runs about the subject (``Run.subject``), or owned by the owner, go with their episodes and
  checkpoints; summaries citing those episodes become invalid, as when a run closes.
* Obligations about the subject (``Obligation.subject``; obligations have no owner) lose their
  payload and result. Their key and state stay: a retry with the key still finds the
  obligation and a second commit is still refused, so the work stays done exactly once.
* Stored API responses describing any of these are forgotten (they repeat their content).

An erasure by consent reference touches no state: runs and obligations name no consent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db.models import QuerySet

from .models import Checkpoint, Episode, Obligation, Run

STATE_TOTALS = ("runs", "episodes", "checkpoints", "obligations_stripped")


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


def state_erasure_counts(*, selector: str, value: str) -> dict[str, int]:
    """What :func:`state_erase` would remove now (a dry run: nothing changes)."""
    runs = runs_matching(selector, value).values("pk")
    return {
        "runs": runs.count(),
        "episodes": Episode.objects.filter(run_id__in=runs).count(),
        "checkpoints": Checkpoint.objects.filter(run_id__in=runs).count(),
        "obligations_stripped": obligations_matching(selector, value).count(),
    }


def state_erase(*, selector: str, value: str, reason: str) -> StateErasure:
    """Erase the state matching ``selector = value`` (see the module doc), in the caller's
    transaction, locking what it changes. Returns the counts (summaries and embeddings it
    invalidated included) and the ids of the runs and obligations."""
    from apps.api.idempotency import purge_responses_about
    from apps.derivations.propagation import summaries_citing, summaries_invalidate

    run_ids = list(runs_matching(selector, value).select_for_update().values_list("pk", flat=True))
    episode_ids = list(Episode.objects.filter(run_id__in=run_ids).values_list("pk", flat=True))
    checkpoint_ids = list(
        Checkpoint.objects.filter(run_id__in=run_ids).values_list("pk", flat=True)
    )
    summary_ids = list(dict.fromkeys(summaries_citing([], episode_ids=episode_ids)))
    invalidated, embeddings = summaries_invalidate(summary_ids, reason=f"source erased: {reason}")
    Episode.objects.filter(pk__in=episode_ids).delete()
    Checkpoint.objects.filter(pk__in=checkpoint_ids).delete()
    Run.objects.filter(pk__in=run_ids).delete()

    obligation_ids = list(
        obligations_matching(selector, value)
        .select_for_update(no_key=True)
        .values_list("pk", flat=True)
    )
    Obligation.objects.filter(pk__in=obligation_ids).update(payload={}, result=None)
    responses = purge_responses_about(
        [str(pk) for pk in [*run_ids, *episode_ids, *checkpoint_ids, *obligation_ids]]
    )
    return StateErasure(
        counts={
            "runs": len(run_ids),
            "episodes": len(episode_ids),
            "checkpoints": len(checkpoint_ids),
            "obligations_stripped": len(obligation_ids),
            "summaries_invalidated": invalidated,
            "embeddings": embeddings,
            "stored_responses": responses,
        },
        run_ids=[str(pk) for pk in run_ids],
        obligation_ids=[str(pk) for pk in obligation_ids],
    )


def state_residues(
    *, run_ids: list[str], obligation_ids: list[str], digest: str, selector: str
) -> list[tuple[str, str]]:
    """``(store, detail)`` for each piece of state an erasure should have removed and did not:
    a run (or its episodes and checkpoints) it erased, an obligation it stripped that holds
    a payload or result again, and any run or obligation whose subject (or a run whose owner)
    has the erasure's content digest (``content_digest({selector: value})``)."""
    from apps.audit.services import content_digest

    found: list[tuple[str, str]] = []
    for pk in Run.objects.filter(pk__in=run_ids).values_list("pk", flat=True):
        found.append(("runs", f"run {pk} still exists"))
    for run_id, count in _per_run(Episode.objects.filter(run_id__in=run_ids)):
        found.append(("episodes", f"{count} episode(s) of erased run {run_id}"))
    for run_id, count in _per_run(Checkpoint.objects.filter(run_id__in=run_ids)):
        found.append(("checkpoints", f"{count} checkpoint(s) of erased run {run_id}"))
    refilled = Obligation.objects.filter(pk__in=obligation_ids).exclude(
        payload={}, result__isnull=True
    )
    for pk in refilled.values_list("pk", flat=True):
        found.append(("obligations", f"obligation {pk} holds a payload or result again"))
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


def _per_run(queryset: QuerySet[Any]) -> list[tuple[Any, int]]:
    from django.db.models import Count

    return [
        (row["run_id"], row["count"])
        for row in queryset.values("run_id").annotate(count=Count("id")).order_by("run_id")
    ]
