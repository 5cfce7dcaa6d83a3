"""Concurrent writers: one fact's writes serialise on its row; different facts do not."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from apps.records.models import Conflict, Fact, MemoryRecord, Observation, PromotionRequest
from apps.tenancy.context import tenant_scope
from tests.conftest import make_agent

from .factories import body
from .support import RECORDS, fact_values

WRITERS = 8


def _race(agents, bodies):
    """POST ``bodies[i]`` as ``agents[i]``, all released at once; returns the responses."""
    barrier = threading.Barrier(len(agents))
    responses: list = [None] * len(agents)
    errors: list[BaseException] = []

    def run(index):
        try:
            barrier.wait(10)
            responses[index] = agents[index].post(RECORDS, bodies[index])
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(agents))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors, errors
    return responses


@pytest.fixture
def writers(tenant):
    agents = [make_agent(tenant, name=f"writer-{n}") for n in range(WRITERS)]
    for agent in agents:  # first use updates last_used_at; keep that out of the race
        assert agent.get("/api/v1/me").status_code == 200
    return agents


@pytest.mark.django_db(transaction=True)
def test_it_numbers_concurrent_versions_of_one_fact_without_gaps(writers, tenant):
    bodies = [
        body(value=f"carrier_{n}", source={"kind": "interaction", "ref": f"interaction:{n}"})
        for n in range(WRITERS)
    ]
    responses = _race(writers, bodies)
    assert [r.status_code for r in responses] == [201] * WRITERS
    outcomes = sorted(r.json()["outcome"] for r in responses)
    assert outcomes == ["conflict"] * (WRITERS - 1) + ["created"]
    with tenant_scope(tenant.pk):
        versions = sorted(MemoryRecord.objects.values_list("version", flat=True))
        fact = Fact.objects.get()
        assert Conflict.objects.filter(state="open").count() == WRITERS - 1
        current = MemoryRecord.objects.get(pk=fact.current_id)
    assert versions == list(range(1, WRITERS + 1))
    assert fact.last_version == WRITERS
    assert current.version == 1
    [created] = [r.json() for r in responses if r.json()["outcome"] == "created"]
    assert str(current.pk) == created["id"]
    facts = fact_values(writers[0])
    assert list(facts) == ["shipping.preference"]
    assert facts["shipping.preference"]["id"] == created["id"]


@pytest.mark.django_db(transaction=True)
def test_it_writes_concurrently_to_different_facts(writers, tenant):
    bodies = [body(key=f"fact.number{n}") for n in range(WRITERS)]
    responses = _race(writers, bodies)
    assert [r.status_code for r in responses] == [201] * WRITERS
    assert {r.json()["outcome"] for r in responses} == {"created"}
    with tenant_scope(tenant.pk):
        assert Fact.objects.count() == WRITERS
        assert set(MemoryRecord.objects.values_list("version", flat=True)) == {1}


@pytest.mark.django_db(transaction=True)
def test_it_merges_concurrent_observations_of_one_value(writers, tenant):
    bodies = [
        body(source={"kind": "interaction", "ref": f"interaction:{n}"}) for n in range(WRITERS)
    ]
    responses = _race(writers, bodies)
    assert [r.status_code for r in responses] == [201] * WRITERS
    outcomes = sorted(r.json()["outcome"] for r in responses)
    assert outcomes == ["created"] + ["observed"] * (WRITERS - 1)
    with tenant_scope(tenant.pk):
        assert MemoryRecord.objects.count() == 1
        assert Observation.objects.count() == WRITERS
        assert PromotionRequest.objects.count() == 1
