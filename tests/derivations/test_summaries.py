"""``/api/v1/summaries``: refused without sources, sensitivity inherited, embedded like a record."""

from __future__ import annotations

import uuid

import pytest

from apps.derivations.models import Embedding, Summary
from apps.tenancy.context import tenant_scope

from .support import RECORDS, SUMMARIES, drain, summarise, write

pytestmark = pytest.mark.django_db


def test_it_refuses_a_summary_without_sources(agent, tenant):
    for sources in (None, [], "x"):
        response = agent.post(SUMMARIES, {"text": "t", "reason": "r", "sources": sources})
        assert response.status_code == 400
        assert "sources" in response.json()["errors"]
    with tenant_scope(tenant.pk):
        assert not Summary.objects.exists()


def test_it_names_an_unknown_source(agent):
    record = write(agent)
    response = summarise(agent, [record["id"], str(uuid.uuid4())])
    assert response.status_code == 422  # a reference that does not resolve
    assert list(response.json()["errors"]) == ["sources[1].id"]


def test_it_treats_another_tenants_record_as_unknown(agent, other_agent, other_tenant):
    theirs = write(other_agent)
    response = summarise(agent, [theirs["id"]])
    assert response.status_code == 422
    assert "sources[0].id" in response.json()["errors"]
    with tenant_scope(other_tenant.pk):
        assert not Summary.objects.exists()


def test_it_refuses_an_unknown_source_type(agent):
    response = agent.post(
        SUMMARIES, {"text": "t", "reason": "r", "sources": [{"type": "rumour", "id": "x"}]}
    )
    assert response.status_code == 400
    assert response.json()["errors"]["sources[0].type"] == ["unknown source type"]


def test_it_refuses_an_unknown_episode(agent):
    response = agent.post(
        SUMMARIES,
        {"text": "t", "reason": "r", "sources": [{"type": "episode", "id": str(uuid.uuid4())}]},
    )
    assert response.status_code == 422
    assert "sources[0]" in next(iter(response.json()["errors"]))


def test_it_takes_the_highest_sensitivity_of_its_sources(agent):
    public = write(agent, sensitivity="public", subject="user:1")
    restricted = write(agent, sensitivity="restricted", subject="user:2")
    response = summarise(agent, [public["id"], restricted["id"]])
    assert response.status_code == 201, response.content
    assert response.json()["sensitivity"] == "restricted"
    assert response.json()["valid"] is True


def test_it_embeds_a_summary_through_the_outbox(agent, tenant):
    record = write(agent)
    summary = summarise(agent, [record["id"]], text="weekday deliveries only").json()
    drain()
    with tenant_scope(tenant.pk):
        assert Embedding.objects.filter(summary_id=summary["id"]).count() == 1
    shown = agent.get(f"{SUMMARIES}/{summary['id']}").json()
    assert shown["text"] == "weekday deliveries only"
    assert shown["embeddings"][0]["model"] == "hashing-256"


def test_a_text_the_model_cannot_place_stays_unembedded_and_searchable(agent, tenant):
    """The hashing model gives a text without a word the zero vector, which pgvector cannot
    compare with anything: it is not stored, and searches by vector keep working."""
    record = write(agent)
    summary = summarise(agent, [record["id"]], text="-- ?! --").json()
    drain()
    with tenant_scope(tenant.pk):
        assert not Embedding.objects.filter(summary_id=summary["id"]).exists()
    response = agent.post("/api/v1/search", {"query": "carrier", "min_similarity": 0})
    assert response.status_code == 200, response.content[:300]


def test_a_record_lists_what_was_derived_from_it(agent):
    record = write(agent)
    summary = summarise(agent, [record["id"]]).json()
    drain()
    derived = agent.get(f"{RECORDS}/{record['id']}").json()["derived"]
    assert [s["id"] for s in derived["summaries"]] == [summary["id"]]
    [embedding] = derived["embeddings"]
    assert set(embedding) == {"model", "dimension", "created_at"}


def test_it_needs_the_write_action(tenant):
    from tests.conftest import make_agent

    reader = make_agent(tenant, "read", name="reader")
    assert reader.post(SUMMARIES, {"text": "t", "reason": "r", "sources": []}).status_code == 403


def test_it_answers_404_for_a_missing_summary(agent):
    assert agent.get(f"{SUMMARIES}/{uuid.uuid4()}").status_code == 404
    assert agent.get(f"{SUMMARIES}/not-an-id").status_code == 404


def test_a_summary_of_an_expired_source_shows_no_text_before_the_sweep(agent, tenant):
    """Expiry is a read-time predicate: the sweep that invalidates the summary may be minutes
    away, and until then its text was readable (found by the evaluation's canaries)."""
    from datetime import timedelta

    from django.utils import timezone

    from apps.records.models import MemoryRecord

    record = write(agent)
    summary = summarise(agent, [record["id"]], text="carrier_a preferred").json()
    with tenant_scope(tenant.pk):
        MemoryRecord.objects.filter(pk=record["id"]).update(
            expires_at=timezone.now() - timedelta(minutes=1)
        )
    shown = agent.get(f"{SUMMARIES}/{summary['id']}").json()
    assert shown["text"] is None
    assert shown["valid"] is False
    assert shown["invalidated"]["reason"] == "a source expired"
    with tenant_scope(tenant.pk):
        assert Summary.objects.get(pk=summary["id"]).text == "carrier_a preferred"  # the sweep's
