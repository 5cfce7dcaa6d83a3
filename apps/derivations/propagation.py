"""What a source's deletion, redaction or expiry does to what was derived from it.

Called inside the transaction of the change (consent revocation, ``record_redact``, a run's
close, which discards its episodes and expires its session records), so the change and its
propagation commit or roll back together. What goes is the deletion definition's
(:mod:`apps.core.deletion`): an expired source is *withdrawn* (it stays until compaction
deletes it, what was derived from it goes now), a discarded episode is deleted:

* the embeddings of the affected record versions are deleted;
* every summary citing any of them becomes invalid, says why and by which audit event, loses
  its text and its embedding, and so is never retrieved again;
* queued work about any of them is dropped from the outbox, and stored API responses
  describing them (or their promotion requests and conflicts, or those summaries) become
  tombstones.

Re-summarisation is not queued: no summariser is configured, so an invalid summary stays
invalid, visibly so.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import Q, QuerySet
from django.utils import timezone

from apps.core import deletion
from apps.records.models import MemoryRecord
from apps.state.models import Episode

from .models import Summary, SummarySource


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


def summaries_invalidate(summary_ids: list[Any], *, reason: str) -> deletion.Outcome:
    """Withdraw ``summary_ids``: they become invalid, their text and embeddings go, queued
    work and stored responses about them are forgotten."""
    return deletion.run(withdrawn={Summary: summary_ids}, now=timezone.now(), reason=reason)


def deletion_propagate(*, record_ids: list[Any], reason: str) -> deletion.Outcome:
    """Withdraw the versions ``record_ids`` (expired, still stored): see the module doc."""
    # Lock the versions first: a summary being written about one of them (it locks its
    # sources) commits before the queries below run, so they see it and invalidate it.
    list(MemoryRecord.objects.select_for_update().filter(pk__in=record_ids).values_list("pk"))
    return deletion.run(withdrawn={MemoryRecord: record_ids}, now=timezone.now(), reason=reason)


def episodes_discard(*, episode_ids: list[Any], reason: str) -> deletion.Outcome:
    """Delete the episodes ``episode_ids`` (their run closed) with what the definition says:
    summaries citing them invalidated, stored responses describing them forgotten."""
    return deletion.run(deleted={Episode: episode_ids}, now=timezone.now(), reason=reason)
