"""A hit must match: its text matches the query's terms, or its vector's cosine similarity is
at least the relevance floor (the embedding model's, or the request's ``min_similarity``)."""

from __future__ import annotations

import pytest

from apps.derivations.embedders import get_embedder
from tests.records.factories import body

from .conftest import embed_all

pytestmark = pytest.mark.django_db

VALUES = {
    "user:1": ("shipping.preference", "ships with carrier alpha"),
    "user:2": ("travel.seat", "prefers window seats"),
    "user:3": ("billing.currency", "invoices in euro"),
    "user:4": ("answer.style", "short answers in support chats"),
}


@pytest.fixture
def memories(agent, tenant):
    ids = {}
    for subject, (key, value) in VALUES.items():
        response = agent.post("/api/v1/records", body(subject=subject, key=key, value=value))
        assert response.status_code == 201, response.content[:400]
        ids[subject] = response.json()["id"]
    embed_all(tenant)
    return ids


def search(agent, **payload):
    response = agent.post("/api/v1/search", payload)
    assert response.status_code == 200, response.content[:500]
    return response.json()["results"]


def test_a_nonsense_query_returns_nothing(agent, memories):
    assert search(agent, query="xylophone") == []
    assert search(agent, query="quasar nebula", top_k=50) == []


def test_a_query_sharing_one_word_with_one_record_returns_that_record_only(agent, memories):
    hits = search(agent, query="window")
    assert [hit["record"]["id"] for hit in hits] == [memories["user:2"]]
    why = hits[0]["why"]
    assert why["text"] is not None
    assert why["text"] > 0
    assert why["vector"] is not None  # the similarity it had, whatever matched


def test_every_vector_hit_is_at_or_above_the_floor(agent, tenant, memories):
    floor = get_embedder(tenant.embedding_model).relevance_floor
    for hit in search(agent, query="carrier seats euro answers", top_k=50):
        assert hit["why"]["text"] is not None or hit["why"]["vector"] >= floor


def test_min_similarity_overrides_the_floor(agent, tenant, memories):
    [vector] = get_embedder(tenant.embedding_model).embed(["shipping.preference: ships"])
    vector = [float(x) for x in vector]
    by_floor = {
        floor: search(agent, vector=vector, min_similarity=floor, top_k=50)
        for floor in (0.0, 0.3, 0.6, 0.9)
    }
    for floor, hits in by_floor.items():
        assert all(hit["why"]["vector"] >= floor for hit in hits)
    ids = {floor: {hit["record"]["id"] for hit in hits} for floor, hits in by_floor.items()}
    assert ids[0.9] <= ids[0.6] <= ids[0.3] <= ids[0.0]
    assert ids[0.0] != ids[0.9]
    assert memories["user:1"] in ids[0.6]


def test_a_vector_query_is_held_to_the_floor_too(agent, tenant, memories):
    content = "shipping.preference: ships with carrier alpha"
    [vector] = get_embedder(tenant.embedding_model).embed([content])
    hits = search(agent, vector=[float(x) for x in vector])
    assert hits[0]["record"]["id"] == memories["user:1"]
    assert search(agent, vector=[float(x) for x in vector], min_similarity=0.99) == hits[:1]


@pytest.mark.parametrize("value", [-0.1, 1.5, "high", True])
def test_it_refuses_a_min_similarity_outside_zero_to_one(agent, value):
    response = agent.post("/api/v1/search", {"query": "carrier", "min_similarity": value})
    assert response.status_code == 400
    assert "min_similarity" in response.json()["errors"]
