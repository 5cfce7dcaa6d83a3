"""The baseline: agent memory as a cache, what most agent memories are.

Every write is embedded and kept; a read returns the nearest neighbours of the query among a
subject's items: no scope, trust or expiry filter, no versions, no conflicts. Deleting removes
the item's row only: the vector index keeps the vector with the payload it was embedded with,
and summaries written from the item stay as they are. Redacting rewrites the row only.

It holds one namespace per subject, as agent memories keyed by a user id do: a kinder
baseline than nearest neighbours over a whole tenant, so what it gets wrong it does not get
wrong for lack of a subject filter. It uses the tenant's embedder, the same as the record
configuration, in the same run.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from apps.derivations.embedders import Embedder


@dataclass
class CacheItem:
    id: str
    subject: str
    key: str
    value: Any
    content: str
    observed_at: str


@dataclass
class _Indexed:
    item: CacheItem  # the payload as it was embedded (a copy: the row may change later)
    vector: Any


@dataclass
class CacheSummary:
    id: str
    text: str
    sources: list[str] = field(default_factory=list)


class NearestNeighbourCache:
    """Rows, a vector index with payloads, and summaries, each kept as a cache keeps them."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self.rows: dict[str, CacheItem] = {}
        self.index: list[_Indexed] = []
        self.summaries: dict[str, CacheSummary] = {}
        self._ids = itertools.count(1)
        self._unembedded: list[CacheItem] = []

    # --- writes -------------------------------------------------------------------------

    def write(self, *, subject: str, key: str, value: Any, content: str, observed_at: str) -> str:
        item = CacheItem(f"c{next(self._ids)}", subject, key, value, content, observed_at)
        self.rows[item.id] = item
        self._unembedded.append(CacheItem(item.id, subject, key, value, content, observed_at))
        return item.id

    def summarise(self, *, text: str, sources: list[str]) -> str:
        summary = CacheSummary(f"s{next(self._ids)}", text, list(sources))
        self.summaries[summary.id] = summary
        return summary.id

    def embed_pending(self, batch: int = 256) -> None:
        """Embed what was written since the last call (a cache embeds on write; batching is
        only faster)."""
        while self._unembedded:
            chunk, self._unembedded = self._unembedded[:batch], self._unembedded[batch:]
            vectors = self.embedder.embed([item.content for item in chunk])
            for item, vector in zip(chunk, vectors, strict=True):
                self.index.append(_Indexed(item, _normalised(vector)))

    def delete(self, item_id: str) -> None:
        """Remove the row; the vector index and the summaries are left as they are."""
        self.rows.pop(item_id, None)

    def erase_subject(self, subject: str) -> None:
        for item_id in [i for i, row in self.rows.items() if row.subject == subject]:
            self.delete(item_id)

    def redact(self, item_id: str, *, marker: str = "[REDACTED]") -> None:
        """Rewrite the row's value and text; the index keeps what it embedded."""
        row = self.rows.get(item_id)
        if row is not None:
            row.value, row.content = marker, marker

    # --- reads --------------------------------------------------------------------------

    def read(self, item_id: str) -> CacheItem | None:
        return self.rows.get(item_id)

    def list_subject(self, subject: str) -> list[CacheItem]:
        return [row for row in self.rows.values() if row.subject == subject]

    def search(self, *, query: str, subject: str | None, top_k: int) -> list[CacheItem]:
        """The ``top_k`` nearest payloads to the query (within a subject's namespace)."""
        self.embed_pending()
        candidates = [e for e in self.index if subject is None or e.item.subject == subject]
        if not candidates:
            return []
        query_vector = _normalised(self.embedder.embed_queries([query])[0])
        matrix = np.vstack([e.vector for e in candidates])
        similarity = matrix @ query_vector
        # Nearest first; the newest first among equals (kinder to a cache than the oldest).
        order = sorted(range(len(candidates)), key=lambda i: (-round(float(similarity[i]), 9), -i))
        return [candidates[i].item for i in order[:top_k]]


def _normalised(vector: Any) -> Any:
    array = np.asarray(vector, dtype=np.float64)
    norm = float(np.linalg.norm(array))
    return array / norm if norm else array
