"""Physical reclamation after deletions: ``VACUUM`` of the tables deletions touch.

A deleted row stays in its table's pages (and its HNSW index) until PostgreSQL vacuums it;
this makes "eventually" bounded and recorded: after the vacuum every top-level receipt deleted
before it started gets ``reclaimed_at`` (an erasure's per-fact receipts read their erasure's:
``DeletionReceipt.storage_reclaimed_at``, one row per deletion, not per fact).

VACUUM cannot run inside a transaction and needs the table's owner (the application role owns
nothing): it runs on an autocommit connection as ``settings.DATABASE_OWNER``; the receipts are
then stamped as the application role, per tenant, under row-level security.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connection
from django.utils import timezone

from apps.audit.models import DeletionReceipt
from apps.core import deletion
from apps.core.database import maintenance_lock, owner_connection
from apps.retrieval.tenant_indexes import index_tenant
from apps.tenancy.context import current_tenant_id, tenant_scope
from apps.tenancy.models import Tenant

logger = logging.getLogger(__name__)

# Every model's table that holds subject data or changes with its deletion (apps.core.deletion).
RECLAIMED_TABLES = deletion.definition().tables()
# VACUUM FULL rewrites a table and all its indexes under an exclusive lock (reads and writes
# of that table wait), one table at a time: hence its own, rarer schedule (settings).
REWRITE_SQL = "VACUUM (FULL, ANALYZE) {}"


@dataclass(frozen=True)
class PendingTenant:
    """A tenant with receipts awaiting reclamation, the embeddings they removed, those it holds."""

    tenant_id: Any
    receipts: int  # top-level: deletions, expiries, erasures
    deleted_embeddings: int
    live_embeddings: int

    @property
    def dead_share(self) -> float:
        total = self.deleted_embeddings + self.live_embeddings
        return self.deleted_embeddings / total if total else 0.0


# Top-level receipts only: an erasure's counts everything it removed (its per-fact receipts
# count versions only).
PENDING_SQL = """
SELECT count(*), coalesce(sum((counts->>'embeddings')::bigint), 0),
       (SELECT count(*) FROM derivations_embedding)
  FROM audit_deletionreceipt WHERE reclaimed_at IS NULL AND parent_id IS NULL
"""


def pending_tenants() -> dict[Any, PendingTenant]:
    """Every tenant with receipts awaiting reclamation (read tenant by tenant, under RLS)."""

    pending = {}
    for tenant_id in Tenant.objects.values_list("pk", flat=True):
        with tenant_scope(tenant_id), connection.cursor() as cursor:
            cursor.execute(PENDING_SQL)
            receipts, deleted, live = cursor.fetchone()
        if receipts:
            pending[tenant_id] = PendingTenant(tenant_id, receipts, deleted, live)
    return pending


# An HNSW vacuum repairs, by a search through the graph on disk, every element with a deleted
# neighbour (with 32 bottom-layer neighbours, most elements once a few percent went); a build
# runs in memory. From about 1 % deleted vacuuming costs as much as a concurrent rebuild, and
# more beyond (docs/performance.md): such an index is rebuilt first, searches and writes going
# on, and the vacuum then finds nothing to repair in it.
HNSW_REBUILD_DEAD_SHARE = 0.01
# Every index is cleaned, however few rows went: by default VACUUM skips it under 2 % dead
# pages, leaving a deleted vector in its HNSW element and a deleted text's lexemes in the
# full-text index (pgvector's vacuum zeroes a deleted element's vector).
VACUUM_SQL = "VACUUM (ANALYZE, INDEX_CLEANUP ON) {}"
# A small index (a model few vectors use) is cheaper to vacuum than to rebuild: a concurrent
# rebuild waits three times for every transaction in flight, whatever the index's size.
HNSW_REBUILD_MIN_BYTES = 1 << 20
# No parallel workers: reclamation (background work) takes one core, searches keep the others.
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


@dataclass(frozen=True)
class Rebuild:
    """An HNSW index to rebuild before the vacuum, and the share of its vectors deleted."""

    index: str
    dead_share: float


def hnsw_rebuild_plan(owner: Any, pending: dict[Any, PendingTenant] | None) -> list[Rebuild]:
    """The HNSW indexes (over the size floor) that lost enough vectors to be rebuilt. A shared
    index's share is the table's (statistics); a tenant's own index's comes from that tenant's
    pending receipts, so one tenant's deletions never rebuild another's graph. ``pending=None``
    (a forced vacuum, no receipts to go by): every index by the table's share."""
    # The statistics of this backend's and others' recent deletes, as of now.
    owner.execute("SELECT pg_stat_clear_snapshot()")
    row = owner.execute(DEAD_SHARE_SQL).fetchone()
    table_share = row[0] if row is not None else 0.0
    plan = []
    for (index,) in owner.execute(HNSW_INDEXES_SQL, [HNSW_REBUILD_MIN_BYTES]).fetchall():
        tenant_id = index_tenant(index)
        if tenant_id is None or pending is None:
            share = table_share
        else:
            tenant = pending.get(tenant_id)
            share = tenant.dead_share if tenant is not None else 0.0
        if share >= HNSW_REBUILD_DEAD_SHARE:
            plan.append(Rebuild(index, share))
    return plan


def reclamation_plan() -> tuple[dict[Any, PendingTenant], list[Rebuild]]:
    """What a reclamation would do now (``memoryconsole reclaim --dry-run``): the tenants
    whose receipts await it, and the HNSW indexes it would rebuild."""
    pending = pending_tenants()
    with owner_connection() as owner:
        return pending, hnsw_rebuild_plan(owner, pending or None)


def vacuum_tables(
    pending: dict[Any, PendingTenant] | None = None,
    progress: Callable[[str], None] | None = None,
    *,
    wait: bool = True,
) -> datetime:
    """VACUUM (ANALYZE) every table deletions touch with every index, after rebuilding the
    HNSW indexes ``pending`` says lost many vectors; returns when it started. ``progress``
    hears of each step. Under the maintenance lock: ``wait`` false raises ``MaintenanceBusy``
    while other maintenance runs."""
    say = progress or (lambda _message: None)
    with owner_connection() as owner:
        maintenance_lock(owner, wait=wait, what="reclamation")
        started = timezone.now()
        owner.execute(
            "SELECT set_config('max_parallel_maintenance_workers', %s, false), "
            "set_config('maintenance_work_mem', %s, false)",
            [str(RECLAIM_PARALLEL_WORKERS), settings.HNSW_BUILD_MEMORY],
        )
        for rebuild in hnsw_rebuild_plan(owner, pending):
            say(f"rebuilding {rebuild.index} ({100 * rebuild.dead_share:.1f} % dead)")
            began = time.monotonic()
            owner.execute(f"REINDEX INDEX CONCURRENTLY {rebuild.index}")
            logger.info(
                "reclamation rebuilt %s (%.1f %% dead) in %.1f s",
                rebuild.index,
                100 * rebuild.dead_share,
                time.monotonic() - began,
            )
        began = time.monotonic()
        for table in RECLAIMED_TABLES:
            say(f"vacuuming {table}")
            owner.execute(VACUUM_SQL.format(table))
        logger.info(
            "reclamation vacuumed %d tables in %.1f s",
            len(RECLAIMED_TABLES),
            time.monotonic() - began,
        )
    return started


def deletions_reclaim(
    *, force: bool = False, progress: Callable[[str], None] | None = None, wait: bool = True
) -> int:
    """Vacuum if any receipt awaits reclamation; stamp (and count) the top-level receipts
    deleted before the vacuum began. ``wait`` false: ``MaintenanceBusy`` while other
    maintenance runs, nothing stamped."""
    if current_tenant_id() is not None:
        raise RuntimeError("deletions_reclaim runs across tenants; call it outside a scope")
    tenants = pending_tenants()
    if not tenants and not force:
        return 0
    started = vacuum_tables(tenants or None, progress, wait=wait)
    stamped = 0
    for tenant_id in tenants:
        with tenant_scope(tenant_id):
            stamped += DeletionReceipt.objects.filter(
                reclaimed_at__isnull=True, parent__isnull=True, deleted_at__lt=started
            ).update(reclaimed_at=timezone.now())
    return stamped


def deletions_rewrite(*, progress: Callable[[str], None] | None = None, wait: bool = True) -> int:
    """Rewrite every table deletions touch with its indexes (``VACUUM FULL``) if a receipt
    awaits it, so no table or index file holds a row deleted before (the write-ahead log keeps
    it until its segments are recycled: README); stamp ``rewritten_at`` (and an empty
    ``reclaimed_at``) on the top-level receipts deleted before, and return how many. Under the
    maintenance lock, as :func:`vacuum_tables`."""
    if current_tenant_id() is not None:
        raise RuntimeError("deletions_rewrite runs across tenants; call it outside a scope")

    def awaiting() -> Any:
        return DeletionReceipt.objects.filter(rewritten_at__isnull=True, parent__isnull=True)

    tenants = []
    for tenant_id in Tenant.objects.values_list("pk", flat=True):
        with tenant_scope(tenant_id):
            if awaiting().exists():
                tenants.append(tenant_id)
    if not tenants:
        return 0
    say = progress or (lambda _message: None)
    with owner_connection() as owner:
        maintenance_lock(owner, wait=wait, what="rewrite")
        started = timezone.now()
        owner.execute(
            "SELECT set_config('maintenance_work_mem', %s, false)", [settings.HNSW_BUILD_MEMORY]
        )
        for table in RECLAIMED_TABLES:
            say(f"rewriting {table}")
            began = time.monotonic()
            owner.execute(REWRITE_SQL.format(table))
            logger.info("reclamation rewrote %s in %.1f s", table, time.monotonic() - began)
    stamped = 0
    now = timezone.now()
    for tenant_id in tenants:
        with tenant_scope(tenant_id):
            before = awaiting().filter(deleted_at__lt=started)
            before.filter(reclaimed_at__isnull=True).update(reclaimed_at=now)
            stamped += before.update(rewritten_at=now)
    return stamped
