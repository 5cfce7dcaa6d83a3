"""HNSW indexes of their own for tenants that hold many embeddings.

A model's HNSW index holds every tenant's vectors. A scoped search walks that graph and
throws away what fails its filters, the other tenants' rows first: for a tenant holding 30 %
of a million vectors, a scope matching 10 % of that tenant passes 3 % of what the scan sees.
The scan then visits many nodes per kept row, which costs time, and the graph's
approximation costs recall (0.92 at 10 %, measured by ``benchmarks/retrieval_search.py``).

A tenant with at least ``TENANT_HNSW_MIN_EMBEDDINGS`` embeddings of its model gets a partial
index, ``WHERE model = … AND tenant_id = …``, which holds its vectors only. It indexes the
normalised vector, ``l2_normalize(vector::vector(N))::vector(N)``, whose cosine distance to a
query is the same as the raw vector's. The planner's costs for a small and a large HNSW index are
nearly equal, so on the shared index's expression it could pick either; on this expression,
which no shared index has, it can only pick the tenant's. Retrieval's probe checks that the
index exists and is valid, then orders by that expression and names the tenant and the
model on the embedding row, so the partial index's predicate is proved.

:func:`tenant_indexes_sync` creates the missing ones and drops those whose tenant fell
below half the threshold (the margin keeps a tenant near the line from flapping) or moved to
another model. It builds with ``CREATE INDEX CONCURRENTLY`` (writes and searches go on) as
the owner role, on an autocommit connection, like the vacuum of ``apps.derivations
.reclamation``. It runs hourly in the beat schedule and as ``memoryconsole tenant-indexes``.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import connection

from apps.derivations.reclamation import owner_connection
from apps.tenancy.context import current_tenant_id, tenant_scope

from .search import HNSW_INDEXED

PREFIX = "embedding_hnsw_t_"
# Twice pgvector's default: a better graph for scans that filter most of what they visit. On
# the 1M benchmark's big tenant (300k vectors), recall@10 at a 10 % scope went from 0.985 to
# 0.990 (100 queries, ef_search 800), for a build of 156 s instead of 85 s.
EF_CONSTRUCTION = 128

EXISTING_SQL = """
SELECT c.relname, i.indisvalid FROM pg_index i
  JOIN pg_class c ON c.oid = i.indexrelid
 WHERE i.indrelid = 'derivations_embedding'::regclass AND starts_with(c.relname, %s)
"""
CAPPED_COUNT_SQL = """
SELECT count(*) FROM (
    SELECT 1 FROM derivations_embedding WHERE tenant_id = %s AND model = %s LIMIT %s
) c
"""


def index_name(tenant_id: uuid.UUID | str, model: str) -> str:
    """``embedding_hnsw_t_<tenant hex>_<model digest>``: 58 characters, within PostgreSQL's 63."""
    digest = hashlib.sha256(model.encode()).hexdigest()[:8]
    return f"{PREFIX}{uuid.UUID(str(tenant_id)).hex}_{digest}"


def index_tenant(name: str) -> uuid.UUID | None:
    """The tenant whose own index ``name`` is (see :func:`index_name`), or None."""
    if not name.startswith(PREFIX):
        return None
    try:
        return uuid.UUID(hex=name[len(PREFIX) :].split("_", 1)[0])
    except ValueError:
        return None


def min_embeddings() -> int:
    return int(settings.TENANT_HNSW_MIN_EMBEDDINGS)


@dataclass
class TenantIndexPlan:
    """What a sync does: indexes to build (tenant, model, dimension) and index names to drop."""

    create: list[tuple[uuid.UUID, str, int]] = field(default_factory=list)
    drop: list[str] = field(default_factory=list)
    keep: list[str] = field(default_factory=list)


def _capped_count(tenant_id: uuid.UUID, model: str, cap: int) -> int:
    with tenant_scope(tenant_id), connection.cursor() as cursor:
        cursor.execute(CAPPED_COUNT_SQL, [tenant_id, model, cap])
        row = cursor.fetchone()
    return int(row[0]) if row else 0


def tenant_index_plan(*, minimum: int | None = None) -> TenantIndexPlan:
    """Decide, per tenant, whether its model's vectors should have an index of their own.

    Counts stop at the threshold (``LIMIT``), so deciding costs at most ``minimum`` index
    entries per tenant, whatever the table holds."""
    from apps.tenancy.models import Tenant

    if current_tenant_id() is not None:
        raise RuntimeError("tenant indexes are planned across tenants; call outside a scope")
    minimum = min_embeddings() if minimum is None else minimum
    with owner_connection() as owner:
        existing = {name: valid for name, valid in owner.execute(EXISTING_SQL, [PREFIX]).fetchall()}
    plan = TenantIndexPlan()
    wanted: set[str] = set()
    for tenant_id, model in Tenant.objects.values_list("pk", "embedding_model"):
        dimension = HNSW_INDEXED.get(model)
        if dimension is None:
            continue  # a model without a shared HNSW index is searched exactly
        name = index_name(tenant_id, model)
        # An index that exists stays down to half the threshold: no flapping near the line.
        floor = max(minimum // 2, 1) if existing.get(name) else minimum
        if _capped_count(tenant_id, model, floor) < floor:
            continue
        wanted.add(name)
        if existing.get(name):
            plan.keep.append(name)
        else:
            plan.create.append((tenant_id, model, dimension))
    for name, valid in sorted(existing.items()):
        # An invalid index is what an interrupted concurrent build leaves: drop it, build again.
        if name not in wanted or not valid:
            plan.drop.append(name)
    return plan


def tenant_indexes_sync(
    *,
    minimum: int | None = None,
    maintenance_work_mem: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> TenantIndexPlan:
    """Build the per-tenant HNSW indexes the plan wants and drop the rest (concurrently)."""
    if connection.in_atomic_block:
        # A concurrent build or drop waits for every transaction open in the database: this
        # one's too, which would never end.
        raise RuntimeError("tenant indexes are built outside a transaction")
    plan = tenant_index_plan(minimum=minimum)
    say = progress or (lambda _message: None)
    with owner_connection() as owner:
        if maintenance_work_mem:
            owner.execute(
                "SELECT set_config('maintenance_work_mem', %s, false)", [maintenance_work_mem]
            )
        for name in plan.drop:
            say(f"dropping {name}")
            owner.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{name}"')
        for tenant_id, model, dimension in plan.create:
            name = index_name(tenant_id, model)
            say(f"building {name} (tenant {tenant_id}, {model})")
            owner.execute(_create_sql(name, tenant_id, model, dimension, owner))
    return plan


def _create_sql(name: str, tenant_id: uuid.UUID, model: str, dimension: int, owner: Any) -> str:
    from psycopg import sql

    statement = sql.SQL(
        "CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON derivations_embedding "
        "USING hnsw ((l2_normalize(vector::vector({dimension}))::vector({dimension})) "
        "vector_cosine_ops) "
        "WITH (m = 16, ef_construction = {ef_construction}) "
        "WHERE model = {model} AND tenant_id = {tenant}::uuid"
    ).format(
        name=sql.Identifier(name),
        dimension=sql.SQL(str(int(dimension))),
        ef_construction=sql.SQL(str(EF_CONSTRUCTION)),
        model=sql.Literal(model),
        tenant=sql.Literal(str(tenant_id)),
    )
    return statement.as_string(owner)
