"""After an erasure and the rewrite, no table or index file holds the erased bytes.

A vacuum only marks a deleted row's space reusable: its bytes stay in the page (and its
words in the full-text index) until something overwrites them. The rewrite (VACUUM FULL)
writes every table and index anew; this reads the data files themselves.
"""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from django.conf import settings

from apps.audit.models import DeletionReceipt
from apps.governance.reclamation import (
    RECLAIMED_TABLES,
    deletions_reclaim,
    deletions_rewrite,
    owner_connection,
)
from apps.tenancy.context import tenant_scope
from tests.derivations.support import drain, summarise, write

pytestmark = pytest.mark.django_db(transaction=True)

CANARY = "zqxcanaryvalue7421"

FILES_SQL = """
SELECT pg_relation_filepath(c.oid) FROM pg_class c
 WHERE c.oid = ANY(ARRAY(
     SELECT t.oid FROM pg_class t WHERE t.relname = ANY(%(tables)s)
     UNION SELECT t.reltoastrelid FROM pg_class t WHERE t.relname = ANY(%(tables)s)
     UNION SELECT i.indexrelid FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid
            WHERE t.relname = ANY(%(tables)s)))
"""


def files_holding(needle: bytes) -> list[str]:
    """The data files (every segment) of the reclaimed tables, their TOAST and their indexes
    that contain ``needle``, after a checkpoint wrote every page out."""
    data_dir = Path(settings.HOME) / "pgdata"
    holding = []
    with owner_connection() as owner:
        paths = [row[0] for row in owner.execute(FILES_SQL, {"tables": list(RECLAIMED_TABLES)})]
    # CHECKPOINT needs the embedded server's superuser (the owner role may not).
    with psycopg.connect(
        host=settings.DATABASE_OWNER["HOST"], user="postgres", dbname="postgres", autocommit=True
    ) as superuser:
        superuser.execute("CHECKPOINT")
    for relative in paths:
        if relative is None:
            continue
        base = data_dir / relative
        for segment in [base, *sorted(base.parent.glob(base.name + ".*"))]:
            if segment.is_file() and needle in segment.read_bytes():
                holding.append(str(segment.relative_to(data_dir)))
    return holding


def test_the_rewrite_removes_erased_bytes_from_every_table_and_index_file(admin_agent, tenant):
    record = write(
        admin_agent,
        subject="user:canary",
        content=f"the customer's code word is {CANARY}",
        value=CANARY,
    )
    summarise(admin_agent, [record["id"]], text=f"summary mentioning {CANARY}")
    drain()
    erased = admin_agent.post("/api/v1/erasures", {"subject": "user:canary", "reason": "asked"})
    assert erased.status_code == 200, erased.content

    deletions_reclaim(force=True)
    assert files_holding(CANARY.encode()), "a vacuum alone leaves the bytes in the pages"

    assert deletions_rewrite() >= 1
    assert files_holding(CANARY.encode()) == []
    with tenant_scope(tenant.pk):
        receipt = DeletionReceipt.objects.get(parent__isnull=True, kind="erasure")
        assert receipt.rewritten_at is not None
        assert receipt.reclaimed_at is not None


def test_the_receipt_says_when_its_bytes_were_rewritten(admin_agent, tenant):
    record = write(admin_agent, subject="user:one")
    admin_agent.delete(f"/api/v1/records/{record['id']}?reason=asked")
    receipts = admin_agent.get("/api/v1/deletion-receipts").json()["results"]
    assert receipts[0]["rewritten_at"] is None
    deletions_rewrite()
    receipts = admin_agent.get("/api/v1/deletion-receipts").json()["results"]
    assert receipts[0]["rewritten_at"] is not None
    assert deletions_rewrite() == 0, "nothing awaits a second rewrite"
