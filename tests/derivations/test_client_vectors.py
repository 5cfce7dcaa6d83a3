"""Vectors sent by agents (tenant model ``client-<dim>``): checked, stored with the write."""

from __future__ import annotations

from typing import Any

import pytest

from apps.audit.models import AuditEvent
from apps.derivations.models import Embedding, Summary
from apps.records.models import MemoryRecord
from apps.tenancy.context import tenant_scope
from apps.tenancy.models import Tenant
from tests.api.support import assert_problem
from tests.conftest import make_agent
from tests.factories import EmbeddingFactory
from tests.records.factories import body

from .support import RECORDS, SEARCH, SUMMARIES, drain, summarise, write

pytestmark = pytest.mark.django_db

VECTOR = [0.5, -0.25, 0.125, 1.0]


@pytest.fixture
def client_model(tenant: Tenant) -> Tenant:
    Tenant.objects.filter(pk=tenant.pk).update(embedding_model="client-4")
    tenant.refresh_from_db()
    return tenant


def embeddings(tenant: Tenant, **lookup: Any) -> list[Embedding]:
    with tenant_scope(tenant.pk):
        return list(Embedding.objects.filter(**lookup))


def stored_records(tenant: Tenant) -> int:
    with tenant_scope(tenant.pk):
        return MemoryRecord.objects.count()


def test_it_stores_the_vector_sent_with_a_record(admin_agent, client_model):
    record = write(admin_agent, vector=VECTOR)
    [embedding] = embeddings(client_model, record_id=record["id"])
    assert embedding.model == "client-4"
    assert embedding.dimension == 4
    assert [float(x) for x in embedding.vector] == VECTOR
    assert "vector" not in record  # the response shows the record, not the vector
    drain()  # the worker computes nothing for a client model, and adds no second row
    assert len(embeddings(client_model, record_id=record["id"])) == 1
    found = admin_agent.post(SEARCH, {"vector": VECTOR, "scope": body()["scope"]})
    assert found.status_code == 200, found.content
    assert [r["record"]["id"] for r in found.json()["results"]] == [record["id"]]


def test_it_refuses_a_vector_of_the_wrong_dimension(admin_agent, client_model):
    response = admin_agent.post(RECORDS, body(vector=[0.1, 0.2, 0.3]))
    problem = assert_problem(response, 400)
    assert "4 dimensions" in problem["errors"]["vector"][0]
    assert stored_records(client_model) == 0
    assert embeddings(client_model) == []
    with tenant_scope(client_model.pk):
        event = AuditEvent.objects.get(action="record.write_rejected")
    assert event.data == {"fields": ["vector"]}


def test_it_names_the_vector_beside_every_other_failing_field(admin_agent, client_model):
    response = admin_agent.post(RECORDS, body(vector="not a list", reason=""))
    problem = assert_problem(response, 400)
    assert set(problem["errors"]) >= {"vector", "reason"}
    assert problem["errors"]["vector"] == ["A list of numbers."]
    assert stored_records(client_model) == 0


@pytest.mark.parametrize(
    "vector",
    [[0, 0, 0, 0], [1, 2, 3, True], [1e300, 0, 0, 0], [1, 2, "3", 4], {"x": 1}],
)
def test_it_refuses_vectors_that_are_not_usable(admin_agent, client_model, vector):
    problem = assert_problem(admin_agent.post(RECORDS, body(vector=vector)), 400)
    assert "vector" in problem["errors"]
    assert stored_records(client_model) == 0


def test_it_refuses_a_vector_when_the_server_computes_them(admin_agent, tenant):
    problem = assert_problem(admin_agent.post(RECORDS, body(vector=VECTOR)), 400)
    assert "hashing-256" in problem["errors"]["vector"][0]
    assert stored_records(tenant) == 0


def test_a_record_without_a_vector_is_stored_unembedded(admin_agent, client_model):
    record = write(admin_agent)
    drain()
    assert embeddings(client_model, record_id=record["id"]) == []


def test_a_repeated_write_keeps_the_first_vector(admin_agent, client_model):
    first = write(admin_agent, vector=VECTOR)
    second_writer = make_agent(client_model, name="second-writer")
    again = write(second_writer, 200, vector=[1.0, 1.0, 1.0, 1.0])
    assert again["id"] == first["id"]  # the same value again: the stored version
    [embedding] = embeddings(client_model, record_id=first["id"])
    assert [float(x) for x in embedding.vector] == VECTOR


def test_the_vector_goes_with_its_record(admin_agent, client_model):
    record = write(admin_agent, vector=VECTOR)
    assert admin_agent.delete(f"{RECORDS}/{record['id']}").status_code == 200
    assert embeddings(client_model) == []


def test_it_stores_the_vector_sent_with_a_summary(admin_agent, client_model):
    record = write(admin_agent, vector=VECTOR)
    response = summarise(admin_agent, [record["id"]], vector=[0.0, 1.0, 0.0, 0.0])
    assert response.status_code == 201, response.content
    [embedding] = embeddings(client_model, summary_id=response.json()["id"])
    assert [float(x) for x in embedding.vector] == [0.0, 1.0, 0.0, 0.0]
    assert response.json()["embeddings"][0]["model"] == "client-4"


def test_it_refuses_a_summary_with_a_wrong_vector_and_stores_nothing(admin_agent, client_model):
    record = write(admin_agent, vector=VECTOR)
    response = admin_agent.post(
        SUMMARIES,
        {"text": "a summary", "sources": [], "reason": "r", "vector": [1.0]},
    )
    problem = assert_problem(response, 400)
    assert set(problem["errors"]) >= {"vector", "sources"}
    response = summarise(admin_agent, [record["id"]], vector=[1.0])
    assert "vector" in assert_problem(response, 400)["errors"]
    with tenant_scope(client_model.pk):
        assert Summary.objects.count() == 0
    assert embeddings(client_model, summary__isnull=False) == []


# --- vectors as pgvector holds them (32-bit floats) ----------------------------------------------

# Each is a list of finite doubles that pgvector cannot compare: 0 as float32, squares that
# vanish or overflow in float32, a component past the float32 range.
UNCOMPARABLE = {
    "subnormal-double": [1e-320] * 4,
    "below-float32": [1e-45] * 4,
    "squares-vanish": [1e-30] * 4,
    "one-tiny-rest-zero": [1e-30, 0.0, 0.0, 0.0],
    "squares-overflow": [1e20] * 4,
    "past-float32": [3.5e38, 0.0, 0.0, 0.0],
    "huge-int": [10**40, 0, 0, 0],
}


@pytest.mark.parametrize("vector", UNCOMPARABLE.values(), ids=UNCOMPARABLE.keys())
def test_it_refuses_a_record_vector_pgvector_cannot_compare(admin_agent, client_model, vector):
    problem = assert_problem(admin_agent.post(RECORDS, body(vector=vector)), 400)
    [message] = problem["errors"]["vector"]
    assert "32-bit float" in message
    assert "normalise it to length 1" in message
    assert stored_records(client_model) == 0
    assert embeddings(client_model) == []


@pytest.mark.parametrize("vector", UNCOMPARABLE.values(), ids=UNCOMPARABLE.keys())
def test_it_refuses_a_summary_vector_pgvector_cannot_compare(admin_agent, client_model, vector):
    record = write(admin_agent, vector=VECTOR)
    problem = assert_problem(summarise(admin_agent, [record["id"]], vector=vector), 400)
    assert "32-bit float" in problem["errors"]["vector"][0]
    with tenant_scope(client_model.pk):
        assert Summary.objects.count() == 0
    assert embeddings(client_model, summary__isnull=False) == []


@pytest.mark.parametrize("vector", UNCOMPARABLE.values(), ids=UNCOMPARABLE.keys())
@pytest.mark.parametrize("query", [None, "carrier"], ids=["vector", "hybrid"])
def test_it_refuses_a_search_vector_pgvector_cannot_compare(
    admin_agent, client_model, vector, query
):
    write(admin_agent, vector=VECTOR)
    search = {"vector": vector, **({"query": query} if query else {})}
    problem = assert_problem(admin_agent.post(SEARCH, search), 400)
    assert "32-bit float" in problem["errors"]["vector"][0]


def test_it_accepts_small_and_large_vectors_pgvector_can_compare(admin_agent, client_model):
    small, large = [1e-20, 0.0, 0.0, 0.0], [1e18, 1e18, 0.0, 0.0]
    first = write(admin_agent, vector=small)
    second = write(admin_agent, subject="user:2", vector=large)
    for vector, expected in [(small, first["id"]), (large, second["id"])]:
        found = admin_agent.post(SEARCH, {"vector": vector, "min_similarity": 0.99})
        assert found.status_code == 200, found.content
        assert [hit["record"]["id"] for hit in found.json()["results"]] == [expected]
        assert found.json()["results"][0]["why"]["vector"] == pytest.approx(1.0)


def test_a_refused_vector_leaves_every_later_search_of_the_tenant_working(
    admin_agent, client_model
):
    """An accepted subnormal vector used to fail every hybrid search of its tenant after it."""
    write(admin_agent, subject="user:1", vector=VECTOR)
    assert_problem(admin_agent.post(RECORDS, body(subject="user:2", vector=[1e-320] * 4)), 400)
    for search in [{"vector": VECTOR}, {"vector": VECTOR, "query": "carrier"}, {"query": "x"}]:
        response = admin_agent.post(SEARCH, search)
        assert response.status_code == 200, (search, response.content[:300])


@pytest.mark.parametrize(
    "stored", [[0.0] * 4, [1e-30] * 4, [1e20] * 4], ids=["zero", "tiny", "huge"]
)
@pytest.mark.parametrize("query", [None, "carrier"], ids=["vector", "hybrid"])
def test_a_search_never_fails_on_a_stored_vector_it_cannot_compare(
    admin_agent, client_model, stored, query
):
    """Defence in depth: such a vector stored before the rule (migration derivations.0007
    removes them) gives no similarity, never a NaN the response cannot carry."""
    good = write(admin_agent, subject="user:1", vector=VECTOR)
    bad = write(admin_agent, subject="user:2", value="carrier_b")
    with tenant_scope(client_model.pk):
        record = MemoryRecord.objects.get(pk=bad["id"])
    EmbeddingFactory(
        tenant=client_model, record=record, model="client-4", vector=stored, content_digest="x"
    )
    search = {"vector": VECTOR, "min_similarity": 0, **({"query": query} if query else {})}
    response = admin_agent.post(SEARCH, search)
    assert response.status_code == 200, response.content[:500]
    hits = {hit["record"]["id"]: hit["why"] for hit in response.json()["results"]}
    assert hits[good["id"]]["vector"] == pytest.approx(1.0)
    if bad["id"] in hits:  # found by its text; pgvector's similarity is NaN or meaningless
        similarity = hits[bad["id"]]["vector"]
        assert similarity is None or -1 <= similarity <= 1
