"""An embedding carries its record's scope, written by the database whatever the caller sends.

Scoped search filters vectors by that copy (``apps.retrieval.search``), so a copy that were
missing or wrong would hide a record from every scoped search: these tests try each way of
writing one.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.derivations.models import Embedding
from apps.records.models import MemoryRecord
from apps.tenancy.context import tenant_scope
from apps.tenancy.models import Tenant

from .support import SEARCH, drain, summarise, write

pytestmark = pytest.mark.django_db


def scopes(tenant: Tenant, **lookup: Any) -> list[tuple[str, str]]:
    with tenant_scope(tenant.pk):
        return list(
            Embedding.objects.filter(**lookup).values_list("scope_domain", "scope_task_type")
        )


def embedding_create(tenant_id: Any, record_id: Any, **scope: str) -> None:
    """An embedding row written directly, as a bulk writer would."""
    Embedding.objects.create(
        tenant_id=tenant_id,
        record_id=record_id,
        model="client-3",
        dimension=3,
        vector=[1.0, 0.0, 0.0],
        content_digest="d",
        created_at=timezone.now(),
        **scope,
    )


def test_it_copies_the_records_scope_onto_the_workers_embedding(admin_agent, tenant):
    record = write(admin_agent, scope={"domain": "travel", "task_type": "booking"})
    drain()
    assert scopes(tenant, record_id=record["id"]) == [("travel", "booking")]


def test_it_copies_the_scope_onto_an_agents_own_vector(admin_agent, tenant):
    Tenant.objects.filter(pk=tenant.pk).update(embedding_model="client-4")
    record = write(admin_agent, vector=[0.5, -0.25, 0.125, 1.0], scope={"domain": "travel"})
    assert scopes(tenant, record_id=record["id"]) == [("travel", "")]


def test_it_writes_the_records_scope_over_whatever_the_caller_sent(admin_agent, tenant):
    record = write(admin_agent, scope={"domain": "travel", "task_type": "booking"})
    drain()
    with tenant_scope(tenant.pk):
        Embedding.objects.filter(record_id=record["id"]).delete()
        embedding_create(tenant.pk, record["id"], scope_domain="billing", scope_task_type="refund")
        assert scopes(tenant, record_id=record["id"]) == [("travel", "booking")]
        Embedding.objects.filter(record_id=record["id"]).update(scope_domain="billing")
    assert scopes(tenant, record_id=record["id"]) == [("travel", "booking")]


def test_a_summarys_vector_has_no_scope(admin_agent, tenant):
    record = write(admin_agent)
    summary = summarise(admin_agent, [record["id"]])
    assert summary.status_code == 201, summary.content
    drain()
    assert scopes(tenant, summary_id=summary.json()["id"]) == [("", "")]


def test_it_refuses_an_embedding_of_another_tenants_record(admin_agent, tenant, other_tenant):
    record = write(admin_agent)
    with (
        tenant_scope(other_tenant.pk),
        pytest.raises(IntegrityError, match="no such record"),
        transaction.atomic(),
    ):
        embedding_create(other_tenant.pk, record["id"])
    assert scopes(other_tenant) == []


def test_a_scoped_vector_search_finds_only_the_scopes_records(admin_agent, tenant):
    Tenant.objects.filter(pk=tenant.pk).update(embedding_model="client-4")
    vector = [0.5, -0.25, 0.125, 1.0]
    travel = write(admin_agent, key="trip.seat", vector=vector, scope={"domain": "travel"})
    write(admin_agent, key="refund.note", vector=vector, scope={"domain": "billing"})
    found = admin_agent.post(SEARCH, {"vector": vector, "scope": {"domain": "travel"}})
    assert found.status_code == 200, found.content
    assert [r["record"]["id"] for r in found.json()["results"]] == [travel["id"]]
    with tenant_scope(tenant.pk):
        assert MemoryRecord.objects.count() == 2
