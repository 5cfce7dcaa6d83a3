"""HNSW indexes of their own for tenants that hold many embeddings, and for their large domains.

A model's HNSW index holds every tenant's vectors, and a scoped search throws away what fails
its filters, the other tenants' rows first: for a tenant holding 30 % of a million vectors, a
scope matching 10 % of it passes 3 % of what the scan sees, which costs time and recall
(``benchmarks/retrieval_search.py``; docs/performance.md).

A tenant with at least ``TENANT_HNSW_MIN_EMBEDDINGS`` embeddings of its model gets a partial
index (``WHERE model = … AND tenant_id = …``) on the normalised vector,
``l2_normalize(vector::vector(N))::vector(N)``: the same cosine distance, but an expression
no shared index has, so the planner (whose costs for a small and a large HNSW index are
nearly equal) can only pick the tenant's. Inside such a tenant, a scope domain holding as
many (and at most half of the tenant's) gets one too (``AND scope_domain = …``), as
``halfvec`` (``…::halfvec(N)``): again an expression no other index has, at half the size; a
search in the domain walks a graph of its domain only, faster and closer to exact, and ranks
by the full-precision distance.

:func:`tenant_indexes_sync` creates the missing ones and drops those whose tenant fell
below half the threshold (the margin keeps a tenant near the line from flapping) or moved to
another model. It builds ``CONCURRENTLY`` (writes and searches go on) as the owner role, on an
autocommit connection, hourly in the beat schedule and as ``memoryconsole tenant-indexes``.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import connection
from psycopg import sql

from apps.core.database import maintenance_lock, owner_connection
from apps.tenancy.context import current_tenant_id, tenant_scope
from apps.tenancy.models import Tenant

# Models with an HNSW index (see the migrations), by dimension.
HNSW_INDEXED = {
    "e5-small": 384,
    "hashing-256": 256,
    "st-all-MiniLM-L6-v2": 384,
    "client-384": 384,
}

PREFIX = "embedding_hnsw_t_"
DOMAIN_PREFIX = "embedding_hnsw_d_"
# A domain holding more than this share of its tenant's vectors gains little from a graph of
# its own (most of what the tenant's graph visits passes the filter); an existing one stays
# up to the second share, so a domain near the line does not flap.
DOMAIN_MAX_SHARE = 0.5
DOMAIN_KEEP_SHARE = 0.75
# Twice pgvector's default: a better graph for scans that filter most of what they visit, which
# raises recall at a narrow scope for a build about twice as long (docs/performance.md).
EF_CONSTRUCTION = 128

EXISTING_SQL = """
SELECT c.relname, i.indisvalid FROM pg_index i
  JOIN pg_class c ON c.oid = i.indexrelid
 WHERE i.indrelid = 'derivations_embedding'::regclass
   AND (starts_with(c.relname, %s) OR starts_with(c.relname, %s))
"""
CAPPED_COUNT_SQL = """
SELECT count(*) FROM (
    SELECT 1 FROM derivations_embedding WHERE tenant_id = %s AND model = %s LIMIT %s
) c
"""
# A record's vectors by domain (summaries have none): read from the scope index alone.
DOMAIN_COUNTS_SQL = """
SELECT scope_domain, count(*) FROM derivations_embedding
 WHERE tenant_id = %s AND model = %s AND record_id IS NOT NULL
 GROUP BY scope_domain
"""


def index_name(tenant_id: uuid.UUID | str, model: str) -> str:
    """``embedding_hnsw_t_<tenant hex>_<model digest>``: 58 characters, within PostgreSQL's 63."""
    digest = hashlib.sha256(model.encode()).hexdigest()[:8]
    return f"{PREFIX}{uuid.UUID(str(tenant_id)).hex}_{digest}"


def domain_index_name(tenant_id: uuid.UUID | str, model: str, domain: str) -> str:
    """``embedding_hnsw_d_<tenant hex>_<model and domain digest>``: 58 characters."""
    digest = hashlib.sha256(f"{model}\0{domain}".encode()).hexdigest()[:8]
    return f"{DOMAIN_PREFIX}{uuid.UUID(str(tenant_id)).hex}_{digest}"


def index_tenant(name: str) -> uuid.UUID | None:
    """The tenant whose own index (or domain index) ``name`` is, or None."""
    for prefix in (PREFIX, DOMAIN_PREFIX):
        if name.startswith(prefix):
            try:
                return uuid.UUID(hex=name[len(prefix) :].split("_", 1)[0])
            except ValueError:
                return None
    return None


def min_embeddings() -> int:
    return int(settings.TENANT_HNSW_MIN_EMBEDDINGS)


@dataclass
class TenantIndexPlan:
    """What a sync does: tenant indexes to build (tenant, model, dimension), domain indexes
    to build (tenant, model, dimension, domain), and index names to drop or keep."""

    create: list[tuple[uuid.UUID, str, int]] = field(default_factory=list)
    create_domains: list[tuple[uuid.UUID, str, int, str]] = field(default_factory=list)
    drop: list[str] = field(default_factory=list)
    keep: list[str] = field(default_factory=list)

    def builds(self) -> list[tuple[str, uuid.UUID, str, int, str | None]]:
        """The indexes this plan builds: name, tenant, model, dimension, domain (None for a
        tenant's)."""
        return [(index_name(t, m), t, m, d, None) for t, m, d in self.create] + [
            (domain_index_name(t, m, domain), t, m, d, domain)
            for t, m, d, domain in self.create_domains
        ]

    @property
    def created(self) -> list[str]:
        return [name for name, *_ in self.builds()]


def build_label(tenant_id: uuid.UUID, model: str, domain: str | None) -> str:
    return f"{tenant_id}, {model}" + ("" if domain is None else f", domain {domain}")


def _capped_count(tenant_id: uuid.UUID, model: str, cap: int) -> int:
    with tenant_scope(tenant_id), connection.cursor() as cursor:
        cursor.execute(CAPPED_COUNT_SQL, [tenant_id, model, cap])
        row = cursor.fetchone()
    return int(row[0]) if row else 0


def _domain_counts(tenant_id: uuid.UUID, model: str) -> dict[str, int]:
    with tenant_scope(tenant_id), connection.cursor() as cursor:
        cursor.execute(DOMAIN_COUNTS_SQL, [tenant_id, model])
        return {domain: int(count) for domain, count in cursor.fetchall()}


def tenant_index_plan(*, minimum: int | None = None) -> TenantIndexPlan:
    """Decide, per tenant, whether its model's vectors should have an index of their own.

    Counts stop at the threshold (``LIMIT``), so deciding costs at most ``minimum`` index
    entries per tenant, whatever the table holds."""

    if current_tenant_id() is not None:
        raise RuntimeError("tenant indexes are planned across tenants; call outside a scope")
    minimum = min_embeddings() if minimum is None else minimum
    with owner_connection() as owner:
        existing = {
            name: valid
            for name, valid in owner.execute(EXISTING_SQL, [PREFIX, DOMAIN_PREFIX]).fetchall()
        }
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
        counts = _domain_counts(tenant_id, model)
        total = sum(counts.values())
        for domain, count in sorted(counts.items()):
            domain_name = domain_index_name(tenant_id, model, domain)
            kept = existing.get(domain_name)
            floor = max(minimum // 2, 1) if kept else minimum
            share = DOMAIN_KEEP_SHARE if kept else DOMAIN_MAX_SHARE
            if not domain or count < floor or count > share * total:
                continue
            wanted.add(domain_name)
            if kept:
                plan.keep.append(domain_name)
            else:
                plan.create_domains.append((tenant_id, model, dimension, domain))
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
    wait: bool = True,
) -> TenantIndexPlan:
    """Build the per-tenant HNSW indexes the plan wants and drop the rest (concurrently), under
    the maintenance lock: ``wait`` false raises :class:`apps.core.database.MaintenanceBusy`
    while a reclamation or a rewrite runs."""
    if connection.in_atomic_block:
        # A concurrent build or drop waits for every transaction open in the database: this
        # one's too, which would never end.
        raise RuntimeError("tenant indexes are built outside a transaction")
    say = progress or (lambda _message: None)
    with owner_connection() as owner:
        maintenance_lock(owner, wait=wait, what="tenant indexes")
        # Planned once the lock is held: a run that waited sees the tenants as they are now.
        plan = tenant_index_plan(minimum=minimum)
        if maintenance_work_mem:
            owner.execute(
                "SELECT set_config('maintenance_work_mem', %s, false)", [maintenance_work_mem]
            )
        for name in plan.drop:
            say(f"dropping {name}")
            owner.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{name}"')
        for name, tenant_id, model, dimension, domain in plan.builds():
            say(f"building {name} (tenant {build_label(tenant_id, model, domain)})")
            owner.execute(_create_sql(name, tenant_id, model, dimension, owner, domain=domain))
    return plan


def _create_sql(
    name: str,
    tenant_id: uuid.UUID,
    model: str,
    dimension: int,
    owner: Any,
    *,
    domain: str | None = None,
) -> str:
    """A tenant's index, or with ``domain`` a domain's (``halfvec``: see the module docs)."""

    kind, ops = (
        ("halfvec", "halfvec_cosine_ops") if domain is not None else ("vector", "vector_cosine_ops")
    )
    statement = sql.SQL(
        "CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON derivations_embedding "
        "USING hnsw ((l2_normalize(vector::vector({dimension}))::{kind}({dimension})) {ops}) "
        "WITH (m = 16, ef_construction = {ef_construction}) "
        "WHERE model = {model} AND tenant_id = {tenant}::uuid{domain}"
    ).format(
        name=sql.Identifier(name),
        dimension=sql.SQL(str(int(dimension))),
        kind=sql.SQL(kind),
        ops=sql.SQL(ops),
        ef_construction=sql.SQL(str(EF_CONSTRUCTION)),
        model=sql.Literal(model),
        tenant=sql.Literal(str(tenant_id)),
        domain=sql.SQL("")
        if domain is None
        else sql.SQL(" AND scope_domain = {}").format(sql.Literal(domain)),
    )
    return statement.as_string(owner)
