"""Which tenants earn an HNSW index of their own, and the command that builds them.

Building one is covered (with recall and the plan it gives) in ``test_filtered_recall.py``;
here the plan is only computed, which reads the catalog and counts, and locks nothing.
"""

from __future__ import annotations

import io

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from apps.retrieval.search import SearchQuery, run_search
from apps.retrieval.tenant_indexes import domain_index_name, index_name, tenant_index_plan
from apps.tenancy.context import tenant_scope
from apps.tenancy.models import Tenant
from tests.conftest import make_agent
from tests.factories import TenantFactory
from tests.records.factories import body

from .conftest import embed_all

pytestmark = pytest.mark.django_db


def _tenant_with(
    slug: str, records: int, model: str = "hashing-256", domains: tuple[str, ...] = ("commerce",)
) -> Tenant:
    tenant = TenantFactory(slug=slug, embedding_model=model)
    agent = make_agent(tenant)
    for i in range(records):
        response = agent.post(
            "/api/v1/records",
            body(subject=f"user:{i}", value=f"fact {i}", scope__domain=domains[i % len(domains)]),
        )
        assert response.status_code == 201, response.json()
    embed_all(tenant)
    return tenant


def test_a_tenant_at_the_threshold_gets_an_index_and_smaller_ones_do_not():
    big = _tenant_with("big", 3)
    small = _tenant_with("small", 2)
    plan = tenant_index_plan(minimum=3)
    # (Other modules' committed tenants may qualify too: only these two are this test's.)
    assert (big.pk, "hashing-256", 256) in plan.create
    assert small.pk not in {t for t, _m, _d in plan.create}
    assert index_name(small.pk, "hashing-256") not in plan.drop + plan.keep


def test_a_domain_gets_an_index_when_large_and_at_most_half_of_its_tenant():
    even = _tenant_with("even", 6, domains=("billing", "support"))
    lopsided = _tenant_with("lopsided", 5, domains=("billing", "billing", "billing", "support"))
    plan = tenant_index_plan(minimum=3)
    assert {(t, d) for t, _m, _dim, d in plan.create_domains if t == even.pk} == {
        (even.pk, "billing"),
        (even.pk, "support"),
    }
    # 4 of 5 in billing: the tenant's own index serves it; support's 1 is below the line.
    assert not [d for t, _m, _dim, d in plan.create_domains if t == lopsided.pk]
    assert (lopsided.pk, "hashing-256", 256) in plan.create
    names = {domain_index_name(even.pk, "hashing-256", d) for d in ("billing", "support")}
    assert names <= set(plan.created)
    assert all(len(name) <= 63 for name in names)


def test_a_model_without_a_shared_hnsw_index_gets_none():
    # client-8 vectors are searched exactly; an HNSW index needs a fixed dimension.
    tenant = TenantFactory(slug="tiny-model", name="Tiny", embedding_model="client-8")
    assert all(t != tenant.pk for t, _m, _d in tenant_index_plan(minimum=1).create)


def test_index_names_fit_postgresql_and_differ_per_tenant_and_model():
    big = _tenant_with("names", 0)
    names = {index_name(big.pk, "hashing-256"), index_name(big.pk, "st-all-MiniLM-L6-v2")}
    assert len(names) == 2
    assert all(len(name) <= 63 for name in names)
    assert index_name(str(big.pk), "hashing-256") == index_name(big.pk, "hashing-256")


def test_the_hnsw_statement_names_the_tenant_on_the_embedding(monkeypatch):
    # Without it the planner cannot prove a tenant's partial index applies.
    from django.db import connection

    tenant = _tenant_with("stmt", 0)
    q = SearchQuery(vector=[1.0] * 256)
    # Every vector search takes the HNSW plan.
    monkeypatch.setattr(settings, "SEARCH_EXACT_LIMIT", -1)
    with tenant_scope(tenant.pk), connection.cursor() as cursor:
        statement, _rows = run_search(
            cursor, tenant_id=tenant.pk, model="hashing-256", q=q, query_vector=q.vector
        )
    assert statement.plan == "hnsw"
    assert "e.tenant_id = %(tenant)s" in statement.sql


def test_the_command_says_what_it_would_do():
    big = _tenant_with("dry", 3)
    out = io.StringIO()
    call_command("tenant_indexes", "--dry-run", "--min", "3", stdout=out)
    assert f"would build {index_name(big.pk, 'hashing-256')}" in out.getvalue()
    assert "0 index(es) stay as they are" in out.getvalue()


def test_the_command_refuses_a_minimum_below_one():
    with pytest.raises(CommandError, match="argument --min: 0 is not at least 1"):
        call_command("tenant_indexes", "--dry-run", "--min", "0")


def test_the_worker_runs_the_sync_hourly(monkeypatch):
    from django.conf import settings

    from apps.retrieval import tasks
    from apps.retrieval import tenant_indexes as module
    from apps.retrieval.tasks import tenant_indexes
    from memoryconsole.celery import app

    app.loader.import_default_modules()
    entry = settings.CELERY_BEAT_SCHEDULE["tenant-indexes"]
    assert entry["task"] in app.tasks
    assert entry["schedule"] == 3600
    tenant = _tenant_with("task", 0)
    calls = []

    def sync(**kwargs):
        calls.append(kwargs)
        return module.TenantIndexPlan(create=[(tenant.pk, "hashing-256", 256)], drop=["old"])

    monkeypatch.setattr(tasks, "tenant_indexes_sync", sync)
    assert tenant_indexes() == {
        "created": [index_name(tenant.pk, "hashing-256")],
        "dropped": ["old"],
    }
    # It skips its turn, rather than wait, while a reclamation holds the maintenance lock.
    assert calls == [{"maintenance_work_mem": settings.HNSW_BUILD_MEMORY, "wait": False}]


def test_the_sync_refuses_to_run_inside_a_transaction():
    # A concurrent build waits for every open transaction, the caller's own included.
    from apps.retrieval.tenant_indexes import tenant_indexes_sync

    with pytest.raises(RuntimeError, match="outside a transaction"):
        tenant_indexes_sync(minimum=1)


@pytest.mark.parametrize(
    ("filters", "own_index_checked"),
    [
        ({}, True),
        ({"domain": "billing"}, False),
        ({"subject": "user:1"}, False),
        ({"purpose": "decision"}, False),
        ({"sensitivity_max": "internal"}, False),
    ],
)
def test_only_an_unfiltered_search_may_shorten_the_candidate_list(
    monkeypatch, filters, own_index_checked
):
    from django.db import connection

    from apps.retrieval import search

    tenant = _tenant_with(f"ef-{len(filters)}-{own_index_checked}", 0)
    q = SearchQuery(vector=[1.0] * 256, **filters)
    monkeypatch.setattr(settings, "SEARCH_EXACT_LIMIT", -1)
    with tenant_scope(tenant.pk), connection.cursor() as cursor:
        statement, _rows = run_search(
            cursor, tenant_id=tenant.pk, model="hashing-256", q=q, query_vector=q.vector
        )
        cursor.execute("SHOW hnsw.ef_search")
        ef_search = cursor.fetchone()[0]
    assert search._unfiltered(q) is own_index_checked
    # This tenant has no index of its own: the shared index's expression, the full list.
    assert "l2_normalize" not in statement.sql
    assert ef_search == str(search.HNSW_EF_SEARCH)
