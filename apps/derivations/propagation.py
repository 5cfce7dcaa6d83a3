"""What a source's deletion, redaction or expiry does to what was derived from it.

Called inside the transaction of the change (consent revocation, ``record_redact``, a run's
close, which discards its episodes and expires its session records), so the
change and its propagation commit or roll back together. Deletions (``record_delete`` and
everything built on it: the API, the console, erasure, expiry compaction) do the same in one
set-based statement with the deletion itself (``apps.derivations.purge``):

* the embeddings of the affected record versions are deleted;
* every summary citing any of them (or, when a whole fact goes, any version of that fact)
  becomes invalid, says why and by which audit event, loses its text and its embedding, and
  so is never retrieved again;
* queued work about any of them is dropped from the outbox, and stored API responses
  describing those summaries are forgotten.

Re-summarisation is not queued: no summariser is configured, so an invalid summary stays
invalid, visibly so.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Q, QuerySet
from django.utils import timezone

from .models import Embedding, Summary, SummarySource
from .outbox import outbox_forget


@dataclass
class Propagation:
    """What the propagation touched; ``stamp`` names the audit event once it exists."""

    summary_ids: list[Any] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    def stamp(self, event_id: Any) -> None:
        """Record ``event_id`` (the deletion's or redaction's audit event) on the summaries."""
        if self.summary_ids:
            Summary.objects.filter(pk__in=self.summary_ids, invalidated_by__isnull=True).update(
                invalidated_by=event_id
            )


def summaries_citing(
    record_ids: Iterable[Any] | QuerySet[Any],
    fact_ids: Iterable[Any] | QuerySet[Any] = (),
    *,
    episode_ids: Iterable[Any] | QuerySet[Any] = (),
) -> list[Any]:
    """Ids of summaries (current tenant) citing any of ``record_ids``, any version of
    ``fact_ids`` or any of ``episode_ids`` (lists, or querysets of ids used as subqueries)."""
    records = record_ids if isinstance(record_ids, QuerySet) else list(record_ids)
    condition = Q(source_type="record", source_id__in=records)
    facts = fact_ids if isinstance(fact_ids, QuerySet) else list(fact_ids)
    if isinstance(facts, QuerySet) or facts:
        condition |= Q(fact_id__in=facts)
    episodes = episode_ids if isinstance(episode_ids, QuerySet) else list(episode_ids)
    if isinstance(episodes, QuerySet) or episodes:
        condition |= Q(source_type="episode", source_id__in=episodes)
    return list(SummarySource.objects.filter(condition).values_list("summary_id", flat=True))


def summaries_invalidate(summary_ids: list[Any], *, reason: str) -> tuple[int, int]:
    """Invalidate ``summary_ids``: text and embeddings go. Returns (invalidated, embeddings)."""
    from apps.api.idempotency import purge_responses_about

    if not summary_ids:
        return 0, 0
    embeddings, _ = Embedding.objects.filter(summary_id__in=summary_ids).delete()
    invalidated = Summary.objects.filter(pk__in=summary_ids, valid=True).update(
        valid=False, invalidated_at=timezone.now(), invalidated_reason=reason
    )
    # The text was derived from the source that went: it goes too (invalid or not).
    Summary.objects.filter(pk__in=summary_ids).exclude(text="").update(text="")
    outbox_forget(summary_ids)
    purge_responses_about([str(pk) for pk in summary_ids])
    return invalidated, embeddings


def deletion_propagate(
    *, record_ids: list[Any], fact_ids: Iterable[Any] = (), reason: str
) -> Propagation:
    """Remove what was derived from ``record_ids`` (about to be deleted); see the module doc."""
    from apps.records.models import MemoryRecord

    # Lock the versions first: a summary being written about one of them (it locks its
    # sources) commits before the queries below run, so they see it and invalidate it.
    list(MemoryRecord.objects.select_for_update().filter(pk__in=record_ids).values_list("pk"))
    record_embeddings, _ = Embedding.objects.filter(record_id__in=record_ids).delete()
    outbox = outbox_forget(record_ids)
    summary_ids = list(dict.fromkeys(summaries_citing(record_ids, fact_ids)))
    invalidated, summary_embeddings = summaries_invalidate(summary_ids, reason=reason)
    return Propagation(
        summary_ids=summary_ids,
        counts={
            "embeddings": record_embeddings + summary_embeddings,
            "summaries_invalidated": invalidated,
            "outbox": outbox,
        },
    )


def episodes_discard_propagate(*, episode_ids: list[Any], reason: str) -> Propagation:
    """Invalidate every summary citing ``episode_ids`` (discarded with their run), as a
    deletion does: text and embeddings go, queued work and stored responses are forgotten.
    Episodes have no embeddings of their own."""
    summary_ids = list(dict.fromkeys(summaries_citing((), episode_ids=episode_ids)))
    invalidated, embeddings = summaries_invalidate(summary_ids, reason=reason)
    return Propagation(
        summary_ids=summary_ids,
        counts={"embeddings": embeddings, "summaries_invalidated": invalidated},
    )
