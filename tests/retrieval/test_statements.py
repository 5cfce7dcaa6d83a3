"""How a search runs: one statement when few candidates pass, the summary branch only for
tenants that wrote a summary, records built as the ORM builds them."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any
from uuid import UUID

import pytest
from django.conf import settings
from django.db import connection
from django.db.models import signals
from django.utils import timezone

from apps.records.models import MemoryRecord
from apps.retrieval import search
from apps.retrieval.search import SearchQuery, run_search
from apps.tenancy.context import tenant_scope
from apps.tenancy.models import Tenant
from tests.records.factories import body

from .conftest import embed_all

pytestmark = pytest.mark.django_db


class Recording:
    """A cursor that remembers the statements it ran."""

    def __init__(self, cursor: Any) -> None:
        self.cursor = cursor
        self.statements: list[str] = []

    def execute(self, sql: str, params: Any = None) -> None:
        self.statements.append(sql)
        self.cursor.execute(sql, params)

    def fetchall(self) -> Any:
        return self.cursor.fetchall()


def write(agent, **overrides):
    response = agent.post("/api/v1/records", body(**overrides))
    assert response.status_code == 201, response.json()
    return response.json()


def run(
    tenant, q: SearchQuery, *, summaries: bool = False, show: tuple[str, ...] = ()
) -> tuple[Any, list[Any], list[str]]:
    """Run a search; ``show``: settings to read inside its transaction, appended to the
    statements it ran as ``name=value``."""
    with tenant_scope(tenant.pk), connection.cursor() as cursor:
        recording = Recording(cursor)
        statement, rows = run_search(
            recording,
            tenant_id=tenant.pk,
            model=tenant.embedding_model,
            q=q,
            query_vector=q.vector,
            summaries=summaries,
        )
        ran = list(recording.statements)
        for name in show:
            cursor.execute(f"SHOW {name}")
            ran.append(f"{name}={cursor.fetchone()[0]}")
    return statement, rows, ran


def vector_of(tenant, text: str) -> list[float]:
    from apps.derivations.embedders import get_embedder

    return [float(x) for x in get_embedder(tenant.embedding_model).embed([text])[0]]


def test_few_candidates_take_one_statement(agent, tenant):
    for n in range(3):
        write(agent, subject=f"user:{n}", value=f"carrier {n}")
    embed_all(tenant)
    statement, rows, ran = run(tenant, SearchQuery(vector=vector_of(tenant, "carrier 1")))
    assert len(ran) == 1
    assert statement.plan == "exact"
    assert len(rows) == 3
    assert {row[search.COUNT_COLUMN] for row in rows} == {3}


def test_many_candidates_take_the_hnsw_statement_after_the_count(agent, tenant, monkeypatch):
    for n in range(3):
        write(agent, subject=f"user:{n}", value=f"carrier {n}")
    embed_all(tenant)
    monkeypatch.setattr(settings, "SEARCH_EXACT_LIMIT", 2)
    q = SearchQuery(query="carrier", vector=vector_of(tenant, "carrier 1"))
    statement, rows, ran = run(tenant, q, show=("hnsw.iterative_scan", "hnsw.ef_search"))
    # The gated statement made the settings the HNSW scan runs with.
    assert ran[2:] == [
        "hnsw.iterative_scan=strict_order",
        f"hnsw.ef_search={search.HNSW_EF_SEARCH}",
    ]
    assert len(ran) == 4  # two statements, then the two settings read
    assert statement.plan == "hnsw+text"
    assert {row[1] for row in rows} == {"record"}
    assert len(rows) == 3


def test_a_repeat_of_many_candidates_skips_the_count(agent, tenant, monkeypatch):
    for n in range(4):
        write(agent, subject=f"user:{n}", value=f"carrier {n}")
    embed_all(tenant)
    monkeypatch.setattr(settings, "SEARCH_EXACT_LIMIT", 2)
    q = SearchQuery(vector=vector_of(tenant, "carrier 1"), top_k=3)
    _statement, first, ran = run(tenant, q)
    assert "counted AS MATERIALIZED" in ran[0]
    statement, rows, ran = run(tenant, q, show=("hnsw.iterative_scan", "hnsw.ef_search"))
    # No count: the HNSW settings, then the HNSW statement, with the same answer.
    assert ran[0].startswith("SELECT set_config('hnsw.iterative_scan'")
    assert "counted" not in ran[1]
    assert ran[2:] == [
        "hnsw.iterative_scan=strict_order",
        f"hnsw.ef_search={search.HNSW_EF_SEARCH}",
    ]
    assert statement.plan == "hnsw"
    assert [row[0] for row in rows] == [row[0] for row in first]
    # The memory is of the filters: other filters, an as_of search, count again.
    for other in (
        SearchQuery(vector=q.vector, top_k=3, subject="user:1"),
        SearchQuery(vector=q.vector, top_k=3, as_of=timezone.now()),
    ):
        _statement, _rows, ran = run(tenant, other)
        assert "counted AS MATERIALIZED" in ran[0]


def test_a_remembered_plan_never_returns_fewer_hits(agent, tenant, monkeypatch):
    from tests.conftest import make_agent

    records = [write(agent, subject=f"user:{n}", value=f"carrier {n}") for n in range(4)]
    embed_all(tenant)
    monkeypatch.setattr(settings, "SEARCH_EXACT_LIMIT", 2)
    q = SearchQuery(vector=vector_of(tenant, "carrier 1"), top_k=3)
    run(tenant, q)  # four candidates: remembered as too many for the exact plan
    deleter = make_agent(tenant, "read,delete", name="deleter-bot")
    for record in records[:2]:
        assert deleter.delete(f"/api/v1/records/{record['id']}").status_code == 200
    # Two left: the HNSW statement returns two of three, so the search counts again and
    # ranks them exactly, and the next search starts from the count.
    statement, rows, ran = run(tenant, q)
    assert len(ran) == 3
    assert "counted AS MATERIALIZED" in ran[2]
    assert statement.plan == "exact"
    assert {row[0] for row in rows} == {UUID(r["id"]) for r in records[2:]}
    _statement, _rows, ran = run(tenant, q)
    assert len(ran) == 1


def test_a_remembered_plan_is_one_tenants_own(
    agent, tenant, other_tenant, other_agent, monkeypatch
):
    for n in range(4):
        write(agent, subject=f"user:{n}", value=f"carrier {n}")
    write(other_agent, subject="user:1", value="carrier 1")
    embed_all(tenant)
    embed_all(other_tenant)
    monkeypatch.setattr(settings, "SEARCH_EXACT_LIMIT", 2)
    q = SearchQuery(vector=vector_of(tenant, "carrier 1"), top_k=1)
    run(tenant, q)
    assert len(run(tenant, q)[2]) == 2  # remembered for this tenant ...
    statement, rows, ran = run(other_tenant, q)  # ... not for the other, same filters
    assert len(ran) == 1
    assert statement.plan == "exact"
    assert len(rows) == 1


def test_a_gated_statement_with_nothing_to_rank_returns_no_hits(agent, tenant):
    _statement, rows, ran = run(tenant, SearchQuery(vector=vector_of(tenant, "nothing")))
    assert len(ran) == 1
    assert [row[0] for row in rows] == [None]  # the count's own row, no hit
    assert rows[0][search.COUNT_COLUMN] == 0
    response = agent.post("/api/v1/search", {"query": "nothing"})
    assert response.status_code == 200
    assert response.json()["results"] == []


def test_the_shut_gate_skips_the_exact_ranking(agent, tenant, monkeypatch):
    for n in range(3):
        write(agent, subject=f"user:{n}", value=f"carrier {n}")
    embed_all(tenant)
    monkeypatch.setattr(settings, "SEARCH_EXACT_LIMIT", 2)
    statement = search.search_statement(
        tenant_id=tenant.pk,
        model=tenant.embedding_model,
        q=SearchQuery(vector=vector_of(tenant, "carrier 1")),
        query_vector=vector_of(tenant, "carrier 1"),
        summaries=False,
    )
    with tenant_scope(tenant.pk), connection.cursor() as cursor:
        explain = "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) "
        cursor.execute(explain + statement.sql, statement.params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
        cursor.execute(statement.sql, statement.params)
        rows = cursor.fetchall()
    assert [row[0] for row in rows] == [None]
    assert rows[0][search.COUNT_COLUMN] == 3
    # The embeddings were never read: the gate's one-time filter kept the branch shut.
    embedding_scans = [line for line in plan.splitlines() if "derivations_embedding" in line]
    assert embedding_scans
    assert all("never executed" in line for line in embedding_scans)


def test_summaries_are_planned_only_for_a_tenant_that_wrote_one(agent, tenant):
    from tests.derivations.support import drain, summarise

    record = write(agent, subject="user:1", value="zanzibar courier")
    embed_all(tenant)
    tenant.refresh_from_db()
    assert tenant.summaries_written is False
    q = SearchQuery(query="zanzibar courier")
    statement, _rows, _ran = run(tenant, q, summaries=tenant.summaries_written)
    assert "derivations_summary" not in statement.sql

    response = summarise(agent, [record["id"]], text="zanzibar courier digest")
    assert response.status_code == 201, response.content
    drain()
    tenant.refresh_from_db()
    assert tenant.summaries_written is True
    response = agent.post("/api/v1/search", {"query": "zanzibar"})
    kinds = [hit["type"] for hit in response.json()["results"]]
    assert "summary" in kinds


def test_the_migration_marks_tenants_that_already_hold_summaries(agent, tenant, other_tenant):
    import importlib

    from tests.derivations.support import summarise

    record = write(agent, subject="user:1", value="zanzibar courier")
    assert summarise(agent, [record["id"]], text="digest").status_code == 201
    Tenant.objects.filter(pk__in=[tenant.pk, other_tenant.pk]).update(summaries_written=False)
    migration = importlib.import_module("apps.tenancy.migrations.0004_tenant_summaries_written")

    # The migration only uses its schema editor's connection.
    migration.mark_tenants_with_summaries(None, SimpleNamespace(connection=connection))
    marked = dict(Tenant.objects.values_list("pk", "summaries_written"))
    assert marked[tenant.pk] is True
    assert marked[other_tenant.pk] is False


def test_records_are_built_as_the_orm_builds_them(agent, tenant):
    # The search builds records without Model.__init__: that is only equivalent while
    # nothing listens for a record's init signals.
    assert not signals.pre_init.has_listeners(MemoryRecord)
    assert not signals.post_init.has_listeners(MemoryRecord)
    write(agent, value={"carrier": "alpha"}, scope={"domain": "c", "conditions": {"r": "eu"}})
    embed_all(tenant)
    _statement, rows, _ran = run(tenant, SearchQuery(vector=vector_of(tenant, "carrier alpha")))
    built = search._record_from_row(rows[0][search.RANKING_COLUMNS : search.CONFLICT_COLUMN])
    with tenant_scope(tenant.pk):
        loaded = MemoryRecord.objects.get(pk=built.pk)
    for f in search.RECORD_FIELDS:
        assert getattr(built, f.attname) == getattr(loaded, f.attname), f.name
    assert built._state.adding is False
    assert built._state.db == loaded._state.db
    assert built.get_deferred_fields() == {"search"}
