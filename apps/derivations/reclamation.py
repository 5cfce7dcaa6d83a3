"""Physical reclamation after deletions: ``VACUUM (ANALYZE)`` of the tables deletions touch.

A deleted row stays in its table's pages (and in the HNSW index) until PostgreSQL vacuums
it. Autovacuum gets there eventually; this makes "eventually" bounded and recorded: after
the vacuum, every receipt deleted before it started gets ``reclaimed_at``.

VACUUM cannot run inside a transaction and needs the table's owner, and the application
role owns nothing; so it runs on a separate autocommit connection as the owner role
(``settings.DATABASE_OWNER``). The receipts are then stamped as the application role, per
tenant, under row-level security.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connection
from django.utils import timezone

from apps.tenancy.context import current_tenant_id, tenant_scope

RECLAIMED_TABLES = (
    "records_memoryrecord",
    "records_fact",
    "records_observation",
    "records_conflict",
    "records_promotionrequest",
    "records_promotionevent",
    "derivations_embedding",
    "derivations_summary",
    "derivations_summarysource",
    "derivations_outboxmessage",
    "api_idempotencykey",
)


def owner_connection() -> Any:
    import psycopg

    owner = settings.DATABASE_OWNER
    return psycopg.connect(
        host=owner.get("HOST") or None,
        port=owner.get("PORT") or None,
        user=owner["USER"],
        password=owner.get("PASSWORD") or None,
        # The database this process uses (the test database under pytest).
        dbname=connection.settings_dict["NAME"],
        autocommit=True,
    )


def _pending_tenants() -> list[Any]:
    from apps.audit.models import DeletionReceipt
    from apps.tenancy.models import Tenant

    pending = []
    for tenant_id in Tenant.objects.values_list("pk", flat=True):
        with tenant_scope(tenant_id):
            if DeletionReceipt.objects.filter(reclaimed_at__isnull=True).exists():
                pending.append(tenant_id)
    return pending


# An HNSW index's vacuum repairs the graph around every deleted vector, which after a large
# erasure takes far longer than building the index again (pgvector's own advice: reindex
# first). Above this share of dead embedding rows, the HNSW indexes are rebuilt concurrently
# (searches and writes go on) before the vacuum, which then finds nothing to repair in them.
HNSW_REBUILD_DEAD_SHARE = 0.05
# A small index (a model few vectors use) is cheaper to vacuum than to rebuild: a concurrent
# rebuild waits three times for every transaction in flight, whatever the index's size.
HNSW_REBUILD_MIN_BYTES = 1 << 20
# Parallel workers for the rebuilds and vacuums: none, so reclamation (background work) takes
# one core and searches keep the others.
RECLAIM_PARALLEL_WORKERS = 0

HNSW_INDEXES_SQL = """
SELECT c.oid::regclass::text FROM pg_index i
  JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am am ON am.oid = c.relam
 WHERE i.indrelid = 'derivations_embedding'::regclass AND am.amname = 'hnsw'
   AND pg_relation_size(c.oid) >= %s
 ORDER BY 1
"""
DEAD_SHARE_SQL = """
SELECT n_dead_tup::float8 / greatest(n_live_tup + n_dead_tup, 1) FROM pg_stat_user_tables
 WHERE relname = 'derivations_embedding'
"""


def _rebuild_hnsw_if_mostly_dead(owner: Any) -> bool:
    # The statistics of this backend's and others' recent deletes, as of now.
    owner.execute("SELECT pg_stat_clear_snapshot()")
    row = owner.execute(DEAD_SHARE_SQL).fetchone()
    if row is None or row[0] < HNSW_REBUILD_DEAD_SHARE:
        return False
    for (index,) in owner.execute(HNSW_INDEXES_SQL, [HNSW_REBUILD_MIN_BYTES]).fetchall():
        owner.execute(f"REINDEX INDEX CONCURRENTLY {index}")
    return True


def vacuum_tables() -> datetime:
    """VACUUM (ANALYZE) every table deletions touch (rebuilding the HNSW indexes first when
    many embeddings went); returns when the vacuum started."""
    started = timezone.now()
    with owner_connection() as owner:
        owner.execute(
            "SELECT set_config('max_parallel_maintenance_workers', %s, false), "
            "set_config('maintenance_work_mem', %s, false)",
            [str(RECLAIM_PARALLEL_WORKERS), settings.HNSW_BUILD_MEMORY],
        )
        _rebuild_hnsw_if_mostly_dead(owner)
        for table in RECLAIMED_TABLES:
            owner.execute(f"VACUUM (ANALYZE) {table}")
    return started


def deletions_reclaim(*, force: bool = False) -> int:
    """Vacuum if any receipt awaits reclamation; stamp those deleted before the vacuum began.

    Returns how many receipts were stamped.
    """
    from apps.audit.models import DeletionReceipt

    if current_tenant_id() is not None:
        raise RuntimeError("deletions_reclaim runs across tenants; call it outside a scope")
    tenants = _pending_tenants()
    if not tenants and not force:
        return 0
    started = vacuum_tables()
    stamped = 0
    for tenant_id in tenants:
        with tenant_scope(tenant_id):
            stamped += DeletionReceipt.objects.filter(
                reclaimed_at__isnull=True, deleted_at__lt=started
            ).update(reclaimed_at=timezone.now())
    return stamped
