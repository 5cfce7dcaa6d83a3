"""derivations 0007: the stored vectors pgvector cannot compare are removed, their sources
queued for embedding again where the tenant's model computes vectors, each removal audited.

Starts from the schema before it with such vectors stored as they were before the vector rule
(a client tenant's subnormal, tiny and huge vectors; the hashing model's zero vector of a
text without a word), migrates, and checks what became of each and that searches work."""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from apps.audit.models import AuditEvent
from apps.derivations.models import Embedding
from apps.tenancy.context import tenant_scope
from apps.tenancy.models import Tenant
from apps.work.models import OutboxMessage
from tests.conftest import _use_role, make_agent

from .support import SEARCH, drain, summarise, write

BEFORE = [("derivations", "0006_erasure_job")]
ALL_ACTIONS = "read,write,search,delete,review,state,erase,audit"


def _migrate(target: list[tuple[str, str]] | None = None) -> None:
    _use_role(settings.DATABASE_OWNER)
    try:
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(target or executor.loader.graph.leaf_nodes())
    finally:
        _use_role(settings.DATABASE_APP)


def _store_as_before(tenant: Tenant, vector: list[float], **source: Any) -> Embedding:
    """A vector stored without the rule (as the API and the hashing model did before)."""
    with tenant_scope(tenant.pk):
        Embedding.objects.filter(**source).delete()
        return Embedding.objects.create(
            tenant_id=tenant.pk,
            model=tenant.embedding_model,
            dimension=len(vector),
            vector=vector,
            content_digest="before",
            created_at=timezone.now(),
            **source,
        )


def _ids(tenant: Tenant, **lookup: Any) -> set[str]:
    with tenant_scope(tenant.pk):
        return {str(pk) for pk in Embedding.objects.filter(**lookup).values_list("pk", flat=True)}


@pytest.mark.django_db(transaction=True)
def test_it_removes_vectors_pgvector_cannot_compare_and_queues_their_sources(tenant, other_tenant):
    Tenant.objects.filter(pk=other_tenant.pk).update(embedding_model="client-4")
    other_tenant.refresh_from_db()
    hashing, client = make_agent(tenant, ALL_ACTIONS), make_agent(other_tenant, ALL_ACTIONS)

    # The hashing tenant: a record embedded as usual, a summary given the zero vector.
    kept_record = write(hashing)
    summary = summarise(hashing, [kept_record["id"]], text="-- ?! --").json()
    drain()
    _store_as_before(tenant, [0.0] * 256, summary_id=summary["id"])
    # The client tenant: one good vector and three that pgvector cannot compare.
    good = write(client, subject="user:1", vector=[0.5, -0.25, 0.125, 1.0])
    bad = {}
    for name, vector in {
        "subnormal": [1e-320] * 4,
        "tiny": [1e-30] * 4,
        "huge": [1e20] * 4,
    }.items():
        record = write(client, subject=f"user:{name}", value=f"carrier_{name}")
        bad[name] = str(_store_as_before(other_tenant, vector, record_id=record["id"]).pk)
        bad[f"{name}_record"] = record["id"]
    with tenant_scope(other_tenant.pk):
        client_events = AuditEvent.objects.count()
    kept = _ids(tenant, record_id=kept_record["id"]) | _ids(other_tenant, record_id=good["id"])

    _migrate(BEFORE)
    _migrate()

    # The good vectors stay; the bad ones are gone.
    assert _ids(tenant) | _ids(other_tenant) == kept
    # The hashing tenant's summary is queued for embedding again (its text still gives the
    # zero vector, which the worker now declines to store); the client tenant's are not.
    with tenant_scope(tenant.pk):
        queued = OutboxMessage.objects.filter(object_id=summary["id"], state="pending")
        assert [m.task_name for m in queued] == ["derivations.embed_summary"]
        [event] = AuditEvent.objects.filter(action="embedding.remove")
        assert (event.object_type, event.object_id) == ("summary", summary["id"])
        assert event.actor_type == "system"
        assert event.data["requeued"] is True
        assert event.data["target"] == {"summary": summary["id"]}
    drain()
    assert _ids(tenant, summary_id=summary["id"]) == set()
    with tenant_scope(other_tenant.pk):
        assert not OutboxMessage.objects.filter(state="pending").exists()
        events = AuditEvent.objects.filter(action="embedding.remove")
        assert {e.data["embedding"] for e in events} == {
            bad[n] for n in ("subnormal", "tiny", "huge")
        }
        assert {e.object_id for e in events} == {
            bad[f"{n}_record"] for n in ("subnormal", "tiny", "huge")
        }
        assert all(e.data["requeued"] is False and e.data["reason"] for e in events)
        assert AuditEvent.objects.count() == client_events + 3

    # Every kind of search works again, and the records are still found by their text.
    for search in [
        {"vector": [1.0, 1.0, 1.0, 1.0], "query": "carrier", "min_similarity": 0},
        {"vector": [1.0, 1.0, 1.0, 1.0]},
        {"query": "carrier"},
    ]:
        response = client.post(SEARCH, search)
        assert response.status_code == 200, (search, response.content[:300])
    found = client.post(SEARCH, {"query": "carrier_tiny"}).json()["results"]
    assert [hit["record"]["id"] for hit in found] == [bad["tiny_record"]]
