"""The cache baseline behaves as a cache: what it is told to forget, it still returns."""

from __future__ import annotations

from apps.derivations.embedders import get_embedder
from apps.evaluation.cache import NearestNeighbourCache


def _cache():
    cache = NearestNeighbourCache(get_embedder("hashing-256"))
    first = cache.write(
        subject="user:1",
        key="k",
        value="carrier a",
        content="ships with carrier a",
        observed_at="1",
    )
    cache.write(
        subject="user:2",
        key="k",
        value="carrier b",
        content="ships with carrier b",
        observed_at="2",
    )
    return cache, first


def test_it_returns_the_nearest_items_of_a_subject_only():
    cache, first = _cache()
    found = cache.search(query="which carrier ships", subject="user:1", top_k=5)
    assert [item.id for item in found] == [first]


def test_deleting_removes_the_row_but_the_vector_still_returns_its_payload():
    cache, first = _cache()
    summary = cache.summarise(text="ships with carrier a", sources=[first])
    cache.delete(first)
    assert cache.read(first) is None
    assert cache.list_subject("user:1") == []
    assert [i.value for i in cache.search(query="carrier", subject="user:1", top_k=5)] == [
        "carrier a"
    ]
    assert cache.summaries[summary].text == "ships with carrier a"


def test_redacting_rewrites_the_row_only():
    cache, first = _cache()
    cache.search(query="x", subject=None, top_k=1)  # embedded as written
    cache.redact(first)
    assert cache.read(first).value == "[REDACTED]"
    assert cache.search(query="carrier a", subject="user:1", top_k=1)[0].value == "carrier a"
