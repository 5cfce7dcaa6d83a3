"""After a deletion, a vacuum reclaims the rows and the receipt records when."""

from __future__ import annotations

import pytest

from apps.audit.models import DeletionReceipt
from apps.derivations.reclamation import deletions_reclaim
from apps.tenancy.context import tenant_scope

from .support import RECORDS, write

# VACUUM runs on its own connection: the deletion must be committed for it to reclaim.
pytestmark = pytest.mark.django_db(transaction=True)


def test_it_stamps_receipts_deleted_before_the_vacuum(admin_agent, tenant, other_agent):
    record = write(admin_agent)
    receipt = admin_agent.delete(f"{RECORDS}/{record['id']}").json()
    assert receipt["reclaimed_at"] is None
    assert deletions_reclaim() == 1
    with tenant_scope(tenant.pk):
        assert DeletionReceipt.objects.get(pk=receipt["id"]).reclaimed_at is not None
    assert deletions_reclaim() == 0  # nothing left to reclaim: no vacuum


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
    from apps.derivations import reclamation

    monkeypatch.setattr(reclamation, "DEAD_SHARE_SQL", f"SELECT {dead_share}::float8")
    monkeypatch.setattr(reclamation, "HNSW_REBUILD_MIN_BYTES", min_bytes)
    before = _hnsw_files()
    assert before, "the migrations create HNSW indexes"
    reclamation.vacuum_tables()
    after = _hnsw_files()
    assert set(after) == set(before)  # same indexes, by name
    changed = {name for name in before if after[name] != before[name]}
    assert changed == (set(before) if rebuilt else set())
