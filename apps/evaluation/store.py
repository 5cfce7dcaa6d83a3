"""The fair baseline: an agent memory shaped like LangGraph's store, done carefully.

What a competent team builds on a key-value store with a vector index (LangGraph's
``BaseStore``: ``put(namespace, key, value)``, ``search(namespace, query=..., limit=...)``,
``delete``, items with a TTL):

* items live in a namespace of (subject, domain): another domain's facts are never seen;
* an item's key is the memory's key: writing the same key again in the namespace replaces the
  item (and its vector), so a newer value supersedes the old one, as it is written;
* a delete removes the item and its vector; erasing a subject deletes its namespaces;
* a lifetime (TTL) is honoured: an expired item is never returned;
* the application keeps consent and sessions itself: revoking a consent deletes what was
  written under it, closing a session deletes what the session wrote;
* a redaction rewrites the item (value and text, re-embedded).

What it does not have, because a store does not: scope below the namespace (task type,
conditions), trust (a provisional observation is an item like any other), review of a
contradiction (the later write wins), a relevance floor (it returns the ``limit`` nearest).
It uses the tenant's embedder, the same as the record in the same run.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from apps.derivations.embedders import Embedder

from .cache import _normalised


@dataclass
class StoreItem:
    id: str
    namespace: tuple[str, str]
    key: str
    value: Any
    content: str
    observed_at: str
    expires_at: float | None = None  # monotonic seconds
    consent_ref: str = ""
    session: str = ""
    vector: Any = None


class NamespacedStore:
    """Items by (namespace, key), each with its vector; searched by meaning in a namespace."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self.items: dict[tuple[tuple[str, str], str], StoreItem] = {}
        self._ids = itertools.count(1)

    def put(
        self,
        *,
        namespace: tuple[str, str],
        key: str,
        value: Any,
        content: str,
        observed_at: str,
        ttl_seconds: float | None = None,
        consent_ref: str = "",
        session: str = "",
    ) -> str:
        """Write the item of ``key`` in ``namespace``, replacing what was there."""
        item = StoreItem(
            id=f"i{next(self._ids)}",
            namespace=namespace,
            key=key,
            value=value,
            content=content,
            observed_at=observed_at,
            expires_at=time.monotonic() + ttl_seconds if ttl_seconds else None,
            consent_ref=consent_ref,
            session=session,
            vector=_normalised(self.embedder.embed([content])[0]),
        )
        self.items[(namespace, key)] = item
        return item.id

    def delete(self, namespace: tuple[str, str], key: str) -> None:
        self.items.pop((namespace, key), None)

    def _delete_where(self, test: Any) -> None:
        for where in [where for where, item in self.items.items() if test(item)]:
            del self.items[where]

    def erase_subject(self, subject: str) -> None:
        self._delete_where(lambda item: item.namespace[0] == subject)

    def revoke_consent(self, consent_ref: str) -> None:
        self._delete_where(lambda item: item.consent_ref == consent_ref)

    def close_session(self, session: str) -> None:
        self._delete_where(lambda item: item.session == session)

    def redact(self, namespace: tuple[str, str], key: str, *, marker: str) -> None:
        item = self.items.get((namespace, key))
        if item is not None:
            self.put(
                namespace=namespace,
                key=key,
                value=marker,
                content=marker,
                observed_at=item.observed_at,
                consent_ref=item.consent_ref,
                session=item.session,
            )

    def search(self, *, namespace: tuple[str, str], query: str, limit: int) -> list[StoreItem]:
        """The ``limit`` live items of the namespace nearest to the query."""
        now = time.monotonic()
        live = [
            item
            for item in self.items.values()
            if item.namespace == namespace and (item.expires_at is None or item.expires_at > now)
        ]
        if not live:
            return []
        query_vector = _normalised(self.embedder.embed_queries([query])[0])
        similarity = np.vstack([item.vector for item in live]) @ query_vector
        order = sorted(range(len(live)), key=lambda i: -float(similarity[i]))
        return [live[i] for i in order[:limit]]
