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
    found = admin_agent.post(SEARCH, {"vector": VECTOR, "scope": {"domain": "commerce"}})
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
