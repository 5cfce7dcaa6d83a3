"""``memoryconsole reembed``: every live record and valid summary, in batches, resumably."""

from __future__ import annotations

import io
from collections import Counter
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from apps.derivations.embedders import HashingEmbedder
from apps.derivations.models import Embedding, Summary
from apps.records.models import MemoryRecord
from apps.tenancy.context import tenant_scope
from apps.tenancy.models import Tenant

from .support import drain, summarise, write

pytestmark = pytest.mark.django_db


def records(agent: Any, count: int, prefix: str = "user:r") -> list[str]:
    return [
        write(agent, subject=f"{prefix}{n}", content=f"customer {n} ships with carrier a")["id"]
        for n in range(count)
    ]


def vectors(tenant: Tenant, model: str) -> Counter[str]:
    """How many ``model`` vectors each record or summary of ``tenant`` has."""
    with tenant_scope(tenant.pk):
        rows = Embedding.objects.filter(model=model).values_list("record_id", "summary_id")
        return Counter(str(record or summary) for record, summary in rows)


def reembed(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("reembed", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_it_embeds_every_live_record_and_valid_summary_with_a_new_model(admin_agent, tenant):
    ids = records(admin_agent, 5)
    valid = summarise(admin_agent, ids[:2], text="customers who ship with carrier a").json()
    invalid = summarise(admin_agent, [ids[4]], text="the last customer").json()
    assert admin_agent.delete(f"/api/v1/records/{ids[4]}").status_code == 200
    drain()  # the worker's embeddings, with the tenant's model
    assert set(vectors(tenant, "hashing-256")) == {*ids[:4], valid["id"]}

    out, err = reembed("acme", "--model", "hashing-64", "--batch-size", "2")

    assert vectors(tenant, "hashing-64") == Counter({pk: 1 for pk in [*ids[:4], valid["id"]]})
    assert invalid["id"] not in vectors(tenant, "hashing-64")
    with tenant_scope(tenant.pk):
        stored = Embedding.objects.filter(model="hashing-64").first()
        assert stored is not None
        assert stored.dimension == 64
        assert not Summary.objects.get(pk=invalid["id"]).valid
    tenant.refresh_from_db()
    assert tenant.embedding_model == "hashing-64"
    assert "4 records and 1 summaries embedded with hashing-64" in out
    assert "hashing-64 is now its model" in out
    assert "5/5" in err  # the progress line


def test_it_makes_the_same_vector_the_worker_would(admin_agent, tenant):
    [record_id] = records(admin_agent, 1)
    reembed("acme")
    with tenant_scope(tenant.pk):
        stored = Embedding.objects.get(record_id=record_id)
        content = MemoryRecord.objects.get(pk=record_id).content
    expected = HashingEmbedder(256).embed([content])[0]
    assert [round(x, 5) for x in stored.vector] == [round(float(x), 5) for x in expected]


def test_it_resumes_after_an_interruption_without_duplicates(admin_agent, tenant, monkeypatch):
    ids = records(admin_agent, 7)
    real_embed = HashingEmbedder.embed
    calls = {"n": 0}

    def failing_third_batch(self: HashingEmbedder, texts: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("killed")
        return real_embed(self, texts)

    monkeypatch.setattr(HashingEmbedder, "embed", failing_third_batch)
    with pytest.raises(RuntimeError, match="killed"):
        reembed("acme", "--model", "hashing-32", "--batch-size", "2")
    # Two batches committed, the third rolled back, and the model did not change yet.
    assert sum(vectors(tenant, "hashing-32").values()) == 4
    tenant.refresh_from_db()
    assert tenant.embedding_model == "hashing-256"

    monkeypatch.setattr(HashingEmbedder, "embed", real_embed)
    out, _ = reembed("acme", "--model", "hashing-32", "--batch-size", "2")

    assert "3 records and 0 summaries" in out  # only what the first run had not done
    assert vectors(tenant, "hashing-32") == Counter({pk: 1 for pk in ids})
    tenant.refresh_from_db()
    assert tenant.embedding_model == "hashing-32"


def test_it_skips_what_already_has_a_vector(admin_agent, tenant):
    ids = records(admin_agent, 3)
    drain()
    out, _ = reembed("acme")
    assert "0 records and 0 summaries embedded with hashing-256" in out
    assert vectors(tenant, "hashing-256") == Counter({pk: 1 for pk in ids})


def test_it_covers_every_tenant_each_as_itself(admin_agent, tenant, other_agent, other_tenant):
    mine = records(admin_agent, 2)
    theirs = records(other_agent, 3, prefix="user:g")

    reembed("globex")
    assert set(vectors(other_tenant, "hashing-256")) == set(theirs)
    assert vectors(tenant, "hashing-256") == Counter()

    out, _ = reembed()
    assert set(vectors(tenant, "hashing-256")) == set(mine)
    assert "acme: 2 records" in out
    assert "globex: 0 records" in out


def test_it_refuses_client_and_unknown_models_and_unknown_tenants(admin_agent, tenant):
    records(admin_agent, 1)
    with pytest.raises(CommandError, match="sent by agents"):
        reembed("acme", "--model", "client-8")
    with pytest.raises(CommandError, match="unknown embedding model"):
        reembed("acme", "--model", "word2vec")
    with pytest.raises(CommandError, match="no tenant"):
        reembed("nope")
    with pytest.raises(CommandError, match="batch-size"):
        reembed("acme", "--batch-size", "0")
    tenant.refresh_from_db()
    assert tenant.embedding_model == "hashing-256"
    assert vectors(tenant, "hashing-256") == Counter()


def test_it_skips_a_tenant_whose_agents_send_vectors(admin_agent, tenant):
    records(admin_agent, 1)
    Tenant.objects.filter(pk=tenant.pk).update(embedding_model="client-8")
    out, _ = reembed()
    assert "acme: skipped" in out
    with pytest.raises(CommandError, match="sent by agents"):
        reembed("acme")


def test_a_lexical_tenant_moves_to_the_default_model_and_is_then_found_by_meaning(
    admin_agent, tenant
):
    """The path an existing tenant takes to the semantic default: searches keep the old
    vectors until the move completes, then the model is e5-small and embeds at write."""
    write(admin_agent, subject="user:m1", content="The customer prefers to be called by phone")
    drain()
    question = {"query": "¿Cómo prefiere el cliente que lo contacten?", "min_similarity": 0.84}
    before = admin_agent.post("/api/v1/search", question).json()
    assert before["results"] == []  # a lexical model does not cross languages

    reembed("acme", "--model", "e5-small")

    tenant.refresh_from_db()
    assert tenant.embedding_model == "e5-small"
    after = admin_agent.post("/api/v1/search", question).json()
    assert [hit["record"]["subject"] for hit in after["results"]] == ["user:m1"]
    later = write(admin_agent, subject="user:m2", content="Invoices go to accounts payable")
    assert set(vectors(tenant, "e5-small")) >= {later["id"]}  # embedded in its write
