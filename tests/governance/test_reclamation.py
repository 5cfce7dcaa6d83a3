"""After a deletion, a vacuum reclaims the rows and the receipt records when."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from apps.audit.models import DeletionReceipt
from apps.core.database import MaintenanceBusy, maintenance_lock
from apps.governance.reclamation import RECLAIMED_TABLES, deletions_reclaim
from apps.governance.tasks import reclaim_deleted, rewrite_deleted
from apps.retrieval.tenant_indexes import tenant_indexes_sync
from apps.tenancy.context import tenant_scope
from tests.derivations.support import RECORDS, write

# VACUUM runs on its own connection: the deletion must be committed for it to reclaim.
pytestmark = pytest.mark.django_db(transaction=True)


def test_it_stamps_receipts_deleted_before_the_vacuum(
    admin_agent, tenant, other_agent, owner_connection
):
    record = write(admin_agent)
    receipt = admin_agent.delete(f"{RECORDS}/{record['id']}").json()
    assert receipt["reclaimed_at"] is None

    # While other maintenance holds the lock (an index build, say), the scheduled runs skip
    # their turn and stamp nothing; a command waits for it.
    maintenance_lock(owner_connection, wait=True, what="a test")
    assert reclaim_deleted() == 0
    assert rewrite_deleted() == 0
    with pytest.raises(MaintenanceBusy, match="tenant indexes: skipped"):
        tenant_indexes_sync(minimum=1, wait=False)
    with tenant_scope(tenant.pk):
        assert DeletionReceipt.objects.get(pk=receipt["id"]).reclaimed_at is None
    owner_connection.close()

    assert deletions_reclaim(wait=False) == 1
    with tenant_scope(tenant.pk):
        assert DeletionReceipt.objects.get(pk=receipt["id"]).reclaimed_at is not None
    assert deletions_reclaim() == 0  # nothing left to reclaim: no vacuum


def test_an_erasures_receipts_are_reclaimed_with_it_in_one_row(
    admin_agent, tenant, other_agent, client, owner
):
    """Reclamation stamps the erasure's receipt alone; each per-fact receipt reports that
    stamp, through the list of the erasure's receipts and through its own page."""
    for key in ("a", "b", "c"):
        write(admin_agent, subject="user:7", key=key)
    erasure = admin_agent.post("/api/v1/erasures", {"subject": "user:7", "reason": "asked"}).json()
    single = admin_agent.delete(f"{RECORDS}/{write(admin_agent, key='d')['id']}").json()
    receipts = "/api/v1/deletion-receipts"
    children = admin_agent.get(receipts, {"parent": erasure["id"]}).json()["results"]
    assert len(children) == 3
    assert [c["reclaimed_at"] for c in children] == [None] * 3

    assert deletions_reclaim() == 2  # the erasure's receipt and the single deletion's

    parent = admin_agent.get(f"{receipts}/{erasure['id']}").json()
    assert parent["reclaimed_at"] is not None
    assert admin_agent.get(f"{receipts}/{single['id']}").json()["reclaimed_at"] is not None
    children = admin_agent.get(receipts, {"parent": erasure["id"]}).json()["results"]
    assert [c["reclaimed_at"] for c in children] == [parent["reclaimed_at"]] * 3
    child = admin_agent.get(f"{receipts}/{children[0]['id']}").json()
    assert child["reclaimed_at"] == parent["reclaimed_at"]
    # The console's receipt pages say the same of a per-fact receipt.
    client.force_login(owner)
    for name in ("deletion", "receipt"):
        page = reverse(
            f"console:{name}", kwargs={"tenant_slug": tenant.slug, "receipt_id": children[0]["id"]}
        )
        html = client.get(page).content.decode()
        assert "Storage reclaimed" in html
        assert "not yet" not in html
    # Another tenant learns nothing of them, by the erasure's id or a receipt's.
    assert other_agent.get(receipts, {"parent": erasure["id"]}).json()["results"] == []
    assert other_agent.get(f"{receipts}/{children[0]['id']}").status_code == 404
    with tenant_scope(tenant.pk):
        stamped = DeletionReceipt.objects.filter(reclaimed_at__isnull=False)
        assert set(map(str, stamped.values_list("pk", flat=True))) == {
            erasure["id"],
            single["id"],
        }
    assert deletions_reclaim() == 0  # the per-fact receipts do not await anything


def test_it_refuses_to_run_inside_a_tenant_scope(tenant):
    with tenant_scope(tenant.pk), pytest.raises(RuntimeError):
        deletions_reclaim()


def _hnsw_files() -> dict[str, int]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, c.relfilenode FROM pg_class c JOIN pg_am am ON am.oid = c.relam"
            " WHERE am.amname = 'hnsw'"
        )
        return dict(cursor.fetchall())


@pytest.mark.parametrize(
    ("dead_share", "min_bytes", "rebuilt"),
    [
        (0.5, 0, True),
        (0.0, 0, False),
        # Small indexes are vacuumed, not rebuilt, however many of their rows went.
        (0.5, 1 << 40, False),
    ],
)
def test_it_rebuilds_the_hnsw_indexes_first_when_many_embeddings_went(
    monkeypatch, dead_share, min_bytes, rebuilt
):
    from apps.governance import reclamation

    monkeypatch.setattr(reclamation, "DEAD_SHARE_SQL", f"SELECT {dead_share}::float8")
    monkeypatch.setattr(reclamation, "HNSW_REBUILD_MIN_BYTES", min_bytes)
    before = _hnsw_files()
    assert before, "the migrations create HNSW indexes"
    reclamation.vacuum_tables()
    after = _hnsw_files()
    assert set(after) == set(before)  # same indexes, by name
    changed = {name for name in before if after[name] != before[name]}
    assert changed == (set(before) if rebuilt else set())


def test_index_tenant_reads_only_tenant_index_names():
    import uuid

    from apps.retrieval.tenant_indexes import domain_index_name, index_name, index_tenant

    tenant_id = uuid.uuid4()
    assert index_tenant(index_name(tenant_id, "hashing-256")) == tenant_id
    # A domain's index is its tenant's to rebuild too.
    assert index_tenant(domain_index_name(tenant_id, "hashing-256", "billing")) == tenant_id
    assert index_tenant("embedding_hnsw_hashing_256") is None
    assert index_tenant("embedding_hnsw_t_not-hex_12345678") is None


def _tenant_with_records(slug: str, count: int) -> tuple[Any, list[str]]:
    from tests.conftest import make_agent
    from tests.factories import TenantFactory
    from tests.records.factories import body
    from tests.retrieval.conftest import embed_all

    tenant = TenantFactory(slug=slug, embedding_model="hashing-256")
    agent = make_agent(tenant, "read,write,delete")
    ids = []
    for i in range(count):
        response = agent.post(RECORDS, body(subject=f"user:{i}", value=f"fact {i}"))
        assert response.status_code == 201, response.json()
        ids.append(response.json()["id"])
    embed_all(tenant)
    return agent, ids


def test_a_deletion_rebuilds_its_own_tenants_index_only(monkeypatch, caplog):
    """One tenant's deletions rebuild that tenant's HNSW index, never another tenant's, and
    leave the shared index alone while the table as a whole lost few rows."""
    from apps.governance import reclamation
    from apps.governance.reclamation import owner_connection
    from apps.retrieval.tenant_indexes import index_name, tenant_indexes_sync

    erasing, erasing_ids = _tenant_with_records("erasing", 4)
    keeping, _ = _tenant_with_records("keeping", 4)
    tenant_indexes_sync(minimum=4)
    own = {t: index_name(t.tenant.pk, "hashing-256") for t in (erasing, keeping)}
    try:
        for record_id in erasing_ids[:2]:
            assert erasing.delete(f"{RECORDS}/{record_id}").status_code == 200
        pending = reclamation.pending_tenants()
        assert pending[erasing.tenant.pk].deleted_embeddings == 2
        assert pending[erasing.tenant.pk].live_embeddings == 2
        assert keeping.tenant.pk not in pending
        monkeypatch.setattr(reclamation, "HNSW_REBUILD_MIN_BYTES", 0)
        monkeypatch.setattr(reclamation, "DEAD_SHARE_SQL", "SELECT 0.0::float8")
        before = _hnsw_files()
        assert set(own.values()) <= set(before)
        with caplog.at_level("INFO", logger="apps.governance.reclamation"):
            assert deletions_reclaim() == 2
        after = _hnsw_files()
        changed = {name for name in before if after[name] != before[name]}
        assert changed == {own[erasing]}
        assert f"reclamation rebuilt {own[erasing]} (50.0 % dead)" in caplog.text
    finally:
        with owner_connection() as owner:
            for name in own.values():
                owner.execute(f"DROP INDEX IF EXISTS {name}")


def test_every_table_is_vacuumed_with_its_indexes_however_few_rows_went(admin_agent, monkeypatch):
    """VACUUM skips index cleanup by default when few pages hold dead rows; reclamation must
    not, or a deleted vector stays in its HNSW element and a deleted text in the full-text
    index while the receipt says reclaimed."""
    from apps.governance import reclamation

    statements: list[str] = []
    real = reclamation.owner_connection

    class Recording:
        def __init__(self) -> None:
            self.conn = real()

        def __enter__(self) -> Recording:
            self.conn.__enter__()
            return self

        def __exit__(self, *exc: Any) -> None:
            self.conn.__exit__(*exc)

        def execute(self, statement: str, *args: Any) -> Any:
            statements.append(statement)
            return self.conn.execute(statement, *args)

    monkeypatch.setattr(reclamation, "owner_connection", Recording)
    record = write(admin_agent)
    admin_agent.delete(f"{RECORDS}/{record['id']}")
    assert deletions_reclaim() == 1
    vacuums = [s for s in statements if s.startswith("VACUUM")]
    assert vacuums == [
        f"VACUUM (ANALYZE, INDEX_CLEANUP ON) {table}" for table in reclamation.RECLAIMED_TABLES
    ]


def test_the_reclaim_command_says_what_it_would_do_then_does_it(admin_agent, tenant):
    import io

    from django.core.management import call_command

    out = io.StringIO()
    call_command("reclaim", stdout=out)
    assert "nothing awaits reclamation" in out.getvalue()

    record = write(admin_agent)
    receipt = admin_agent.delete(f"{RECORDS}/{record['id']}").json()
    out = io.StringIO()
    call_command("reclaim", "--dry-run", stdout=out)
    assert f"tenant {tenant.pk}: 1 receipt(s) await reclamation" in out.getvalue()
    # The tables the deletion definition reaches, every one of them.
    tables = ", ".join(RECLAIMED_TABLES)
    assert f"would vacuum {len(RECLAIMED_TABLES)} tables: {tables}" in out.getvalue()
    with tenant_scope(tenant.pk):  # a dry run stamps nothing
        assert DeletionReceipt.objects.get(pk=receipt["id"]).reclaimed_at is None

    out, err = io.StringIO(), io.StringIO()
    call_command("reclaim", stdout=out, stderr=err)
    assert "reclaimed: 1 receipt(s) stamped" in out.getvalue()
    assert "vacuuming derivations_embedding" in err.getvalue()
    with tenant_scope(tenant.pk):
        assert DeletionReceipt.objects.get(pk=receipt["id"]).reclaimed_at is not None
