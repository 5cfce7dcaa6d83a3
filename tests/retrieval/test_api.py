"""POST /api/v1/search: filters before ranking, hybrid ranking, provenance, errors."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from apps.audit.models import AuditEvent
from apps.records.models import MemoryRecord
from apps.tenancy.context import tenant_scope
from tests.conftest import make_agent
from tests.records.factories import body

from .conftest import embed_all

pytestmark = pytest.mark.django_db


def write(agent, **overrides):
    response = agent.post("/api/v1/records", body(**overrides))
    assert response.status_code == 201, response.json()
    return response.json()


def search(agent, **payload):
    return agent.post("/api/v1/search", payload)


def subjects(response):
    return [hit["record"]["subject"] for hit in response.json()["results"]]


def test_it_finds_by_text_before_any_embedding_exists(agent):
    write(agent, subject="user:1", value="ships with carrier alpha")
    write(agent, subject="user:2", value="prefers window seats", key="travel.seat")
    response = search(agent, query="carrier alpha")
    assert response.status_code == 200
    assert subjects(response) == ["user:1"]
    assert response.json()["results"][0]["why"]["vector"] is None


def test_it_ranks_by_vector_and_text_once_embedded(agent, tenant):
    write(agent, subject="user:1", value="ships with carrier alpha")
    write(agent, subject="user:2", value="ships with carrier beta, window seats", key="travel.seat")
    embed_all(tenant)
    response = search(agent, query="ships carrier")
    hits = response.json()["results"]
    assert hits[0]["record"]["subject"] == "user:1"
    assert hits[0]["why"]["vector"] > hits[1]["why"]["vector"]
    assert hits[0]["why"]["text"] is not None
    # Both match the text alike; the vector breaks the tie.
    assert hits[0]["score"] >= hits[1]["score"]


def test_it_filters_by_scope_before_ranking(agent, tenant):
    write(agent, subject="user:1", value="carrier alpha", scope={"domain": "commerce"})
    write(agent, subject="user:2", value="carrier alpha", scope={"domain": "legal"})
    embed_all(tenant)
    response = search(agent, query="carrier alpha", scope={"domain": "legal"})
    assert subjects(response) == ["user:2"]


def test_it_matches_conditions_by_containment(agent, tenant):
    write(
        agent,
        subject="user:1",
        value="carrier",
        scope={"domain": "c", "conditions": {"region": "eu", "tier": 1}},
    )
    write(
        agent,
        subject="user:2",
        value="carrier",
        scope={"domain": "c", "conditions": {"region": "us"}},
    )
    embed_all(tenant)
    exact = {"domain": "c", "conditions": {"region": "eu"}}
    response = search(agent, query="carrier", scope=exact, scope_match="exact")
    assert subjects(response) == ["user:1"]


def test_a_memory_applies_to_a_search_whose_scope_contains_its_own(agent, tenant):
    """General to specific: a memory of the domain alone governs the domain's email task with
    any conditions; one observed under conditions the search does not state does not."""
    general = {"domain": "support"}
    write(agent, subject="user:1", key="answer.length", value="short", scope=general)
    write(
        agent,
        subject="user:2",
        key="answer.length",
        value="short",
        scope={"domain": "support", "task_type": "email", "conditions": {"tier": "gold"}},
    )
    write(
        agent,
        subject="user:3",
        key="answer.length",
        value="short",
        scope={"domain": "support", "task_type": "phone"},
    )
    write(agent, subject="user:4", key="answer.length", value="short", scope={"domain": "legal"})
    embed_all(tenant)
    email = {"domain": "support", "task_type": "email"}
    assert subjects(search(agent, query="answer length", scope=email)) == ["user:1"]
    gold = {**email, "conditions": {"tier": "gold", "region": "eu"}}
    assert sorted(subjects(search(agent, query="answer length", scope=gold))) == [
        "user:1",
        "user:2",
    ]
    support = {"domain": "support"}
    assert subjects(search(agent, query="answer length", scope=support)) == ["user:1"]
    exact = search(agent, query="answer length", scope=support, scope_match="exact")
    assert sorted(subjects(exact)) == ["user:1", "user:2", "user:3"]


def test_it_returns_only_confirmed_records_for_decisions_and_audits_them(agent, tenant):
    first = write(agent, subject="user:1", value="carrier alpha")
    write(agent, subject="user:2", value="carrier alpha")
    with tenant_scope(tenant.pk):
        MemoryRecord.objects.filter(pk=first["id"]).update(trust="confirmed")
    embed_all(tenant)
    response = search(agent, query="carrier alpha", purpose="decision", scope=body()["scope"])
    assert subjects(response) == ["user:1"]
    with tenant_scope(tenant.pk):
        event = AuditEvent.objects.filter(action="search.decision").get()
    assert event.data["returned"] == [first["id"]]


def test_it_does_not_audit_context_searches(agent, tenant):
    write(agent, value="carrier alpha")
    search(agent, query="carrier")
    with tenant_scope(tenant.pk):
        assert not AuditEvent.objects.filter(action="search.decision").exists()


def test_it_never_returns_expired_superseded_or_deleted_records(agent, tenant):
    expired = write(agent, subject="user:1", value="carrier alpha")
    old = write(agent, subject="user:2", value="carrier alpha old")
    deleted = write(agent, subject="user:3", value="carrier alpha gone")
    kept = write(agent, subject="user:4", value="carrier alpha kept")
    with tenant_scope(tenant.pk):
        MemoryRecord.objects.filter(pk=expired["id"]).update(
            expires_at=timezone.now() - timedelta(seconds=1)
        )
        MemoryRecord.objects.filter(pk=old["id"]).update(status="superseded", is_current=False)
    assert agent.delete(f"/api/v1/records/{deleted['id']}").status_code in (200, 403)
    deleter = make_agent(tenant, "delete", name="deleter")
    deleter.delete(f"/api/v1/records/{deleted['id']}")
    embed_all(tenant)
    response = search(agent, query="carrier alpha")
    assert subjects(response) == ["user:4"]
    assert kept["id"] == response.json()["results"][0]["record"]["id"]


def test_it_never_returns_another_tenants_records(agent, tenant, other_agent, other_tenant):
    write(other_agent, subject="user:1", value="carrier alpha secret")
    write(agent, subject="user:2", value="prefers trains")
    embed_all(tenant)
    embed_all(other_tenant)
    response = search(agent, query="carrier alpha secret")
    assert "user:1" not in subjects(response)
    vector = search(agent, query="carrier alpha secret").json()
    assert all(hit["record"]["subject"] != "user:1" for hit in vector["results"])


def test_it_returns_provenance_with_each_hit(agent):
    write(agent, value="carrier alpha")
    hit = search(agent, query="carrier").json()["results"][0]
    assert hit["trust"] == "provisional"
    assert hit["expires_at"]
    assert hit["provenance"]["source"]["ref"] == "interaction:4821"
    assert hit["provenance"]["writer"]["type"] == "credential"
    assert hit["provenance"]["owner"] == "user:alice"


def test_it_searches_by_client_vector_alone(agent, tenant):
    tenant.embedding_model = "client-3"
    tenant.save(update_fields=["embedding_model"])
    record = write(agent, value="anything")
    from apps.derivations.embeddings import embedding_upsert

    with tenant_scope(tenant.pk):
        embedding_upsert(
            tenant_id=tenant.pk,
            model="client-3",
            vector=[1.0, 0.0, 0.0],
            content_digest="-",
            record_id=record["id"],
        )
    response = search(agent, vector=[0.9, 0.1, 0.0])
    assert response.status_code == 200
    assert response.json()["results"][0]["record"]["id"] == record["id"]
    assert search(agent, vector=[1.0, 0.0]).json()["errors"]["vector"]


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({}, "query"),
        ({"query": ""}, "query"),
        ({"query": "x", "top_k": 0}, "top_k"),
        ({"query": "x", "top_k": 101}, "top_k"),
        ({"query": "x", "top_k": "5"}, "top_k"),
        ({"query": "x", "scope": {"domian": "typo"}}, "scope.domian"),
        ({"query": "x", "scope": "commerce"}, "scope"),
        ({"query": "x", "purpose": "act"}, "purpose"),
        ({"query": "x", "vector": [0.1, 0.2]}, "vector"),
        ({"query": "x", "sensitivity_max": "secret"}, "sensitivity_max"),
        ({"query": "x", "as_of": "yesterday"}, "as_of"),
        ({"query": "x", "keys": "a.b"}, "keys"),
        ({"query": "x", "colour": "red"}, "colour"),
    ],
)
def test_it_rejects_bad_input_naming_the_field(agent, payload, field):
    response = search(agent, **payload)
    assert response.status_code == 400
    assert response["Content-Type"] == "application/problem+json"
    assert field in response.json()["errors"]


def test_it_needs_the_search_action(tenant):
    reader = make_agent(tenant, "read", name="reader")
    assert search(reader, query="x").status_code == 403


def test_it_lets_gin_indexes_work_under_row_level_security():
    """RLS blocks index use for operators that are not LEAKPROOF; ours are marked."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT proname, proleakproof FROM pg_proc "
            "WHERE proname IN ('jsonb_contains', 'ts_match_vq') ORDER BY proname"
        )
        assert cursor.fetchall() == [("jsonb_contains", True), ("ts_match_vq", True)]


def test_it_includes_valid_summaries_under_the_same_filters(agent, tenant):
    from apps.derivations.models import Summary
    from tests.derivations.support import drain, summarise

    in_scope = write(agent, subject="user:1", value="plain", scope={"domain": "commerce"})
    elsewhere = write(agent, subject="user:2", value="plain", scope={"domain": "legal"})
    digest = summarise(agent, [in_scope["id"]], text="zanzibar courier digest").json()
    mixed = summarise(agent, [in_scope["id"], elsewhere["id"]], text="zanzibar courier mix").json()
    drain()  # embeds the records and both summaries, as the worker would

    def found(**payload):
        response = search(agent, query="zanzibar courier", **payload)
        assert response.status_code == 200, response.content
        return {
            hit["summary"]["id"] for hit in response.json()["results"] if hit["type"] == "summary"
        }

    hit = next(h for h in search(agent, query="zanzibar courier").json()["results"])
    assert hit["type"] == "summary"
    assert hit["why"]["vector"] is not None
    assert hit["why"]["text"] is not None
    assert hit["provenance"]["source"]["sources"][0]["id"] == in_scope["id"]
    assert found() == {digest["id"], mixed["id"]}
    # Under a scope, only summaries whose every cited record is in that scope.
    assert found(scope={"domain": "commerce"}) == {digest["id"]}
    # Their sensitivity is their sources' (personal): a lower limit leaves them out.
    assert found(sensitivity_max="internal") == set()
    # Never confirmed, so never a basis for a decision.
    assert found(purpose="decision", scope={"domain": "commerce"}) == set()
    with tenant_scope(tenant.pk):
        Summary.objects.filter(pk=digest["id"]).update(valid=False)
    assert found() == {mixed["id"]}


def test_it_returns_each_record_exactly_as_a_read_does(agent, tenant):
    created = write(
        agent,
        value={"carrier": "alpha", "n": [1, 2]},
        scope={"domain": "commerce", "task_type": "checkout", "conditions": {"region": "eu"}},
    )
    embed_all(tenant)
    [hit] = search(agent, query="alpha").json()["results"]
    read = agent.get(f"/api/v1/records/{created['id']}").json()
    assert hit["record"] == {field: read[field] for field in hit["record"]}
    assert hit["record"]["value"] == {"carrier": "alpha", "n": [1, 2]}
