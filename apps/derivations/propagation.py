"""What a source's deletion, redaction, expiry or raised class does to what was derived from it.

A withdrawn source (``apps.records.services.deletion_propagate``: consent revocation,
``record_redact``, a run's close expiring its session records) and a discarded episode
(``apps.state.services.episodes_discard``) take what the deletion definition says
(:mod:`apps.core.deletion`), inside the transaction of the change, so the change and its
propagation commit or roll back together. An expired source is *withdrawn* (it stays until
compaction deletes it, what was derived from it goes now), a discarded episode is deleted:

* the embeddings of the affected record versions are deleted;
* every summary citing any of them becomes invalid, says why and by which audit event, loses
  its text and its embedding, and so is never retrieved again;
* queued work about any of them is dropped from the outbox, and stored API responses
  describing them (or their promotion requests and conflicts, or those summaries) become
  tombstones.

Re-summarisation is not queued: no summariser is configured, so an invalid summary stays
invalid, visibly so. A record re-observed at a higher class raises the class of the summaries
citing it (``summaries_class_raise``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import Q, QuerySet
from django.utils import timezone

from apps.core import deletion
from apps.records.models import SENSITIVITY_ORDER

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


def summaries_class_raise(record_id: Any, sensitivity: str) -> int:
    """Raise every summary citing the version ``record_id`` to ``sensitivity`` where it is
    lower (a summary is as sensitive as the most sensitive thing it cites); returns how many.
    The records app asks it when a re-observation raises a record's class
    (apps/derivations/receivers.py)."""
    lower = SENSITIVITY_ORDER[: SENSITIVITY_ORDER.index(sensitivity)]
    return Summary.objects.filter(
        pk__in=summaries_citing([record_id]), sensitivity__in=lower
    ).update(sensitivity=sensitivity)
