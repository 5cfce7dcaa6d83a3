"""The schema keeps what distributing tenants across servers by ``tenant_id`` needs
(docs/scaling.md, "Tenant sharding"): every tenant-owned table has ``tenant_id`` in its primary
key or in a unique constraint, and every foreign key between tenant-owned tables includes it,
so each tenant's rows and the rows they point to can live on one shard. What does not yet is
listed here with why, as in the document; a new table or key must keep the property or be
added to both."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.django_db

TENANT_TABLES = """
SELECT c.relname FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid
 WHERE a.attname = 'tenant_id' AND NOT a.attisdropped AND c.relkind IN ('r', 'p')
   AND c.relnamespace = 'public'::regnamespace
"""
UNIQUE_KEYS = """
SELECT i.indrelid::regclass::text,
       array(SELECT a.attname FROM unnest(i.indkey) k
               JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k)
  FROM pg_index i WHERE i.indisunique AND i.indpred IS NULL
"""
FOREIGN_KEYS = """
SELECT conrelid::regclass::text, confrelid::regclass::text,
       array(SELECT a.attname FROM unnest(conkey) k
               JOIN pg_attribute a ON a.attrelid = conrelid AND a.attnum = k)
  FROM pg_constraint WHERE contype = 'f'
"""


PRIMARY_KEY_TYPES = """
SELECT i.indrelid::regclass::text, array_agg(format_type(a.atttypid, a.atttypmod))
  FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
 WHERE i.indisprimary GROUP BY 1
"""

# Tenant-owned tables keyed by their ``id`` alone (Django's single-column primary key: a random
# UUID, or a bigint from a sequence), with no unique constraint naming ``tenant_id``. A
# distributed table's keys must include the distribution column, so each needs a
# ``UNIQUE (tenant_id, id)`` before it is distributed (docs/scaling.md).
KEYED_BY_ID_ALONE = {
    "audit_deletionreceipt",
    "audit_erasureledger",
    "derivations_embedding",
    "derivations_erasurejob",
    "derivations_outboxmessage",
    "derivations_summary",
    "derivations_summarysource",
    "evaluation_evaluationrun",
    "records_conflict",
    "records_legalhold",
    "records_memoryrecord",
    "records_observation",
    "records_promotionevent",
    "records_promotionrequest",
    "records_reviewclaim",
    "state_run",
    "tenancy_agentcredential",
}
# Foreign keys between tenant-owned tables on the target's id alone: Django has no composite
# foreign keys. Both rows are the same tenant's (row-level security lets a writer see only its
# own tenant's rows to point at), which co-location needs; the database would need the
# composite key ``(tenant_id, x_id)`` to enforce it on a distributed table (docs/scaling.md).
FOREIGN_KEYS_ON_ID_ALONE = {
    ("audit_deletionreceipt", "audit_deletionreceipt", "parent_id"),
    ("derivations_embedding", "derivations_summary", "summary_id"),
    ("derivations_embedding", "records_memoryrecord", "record_id"),
    ("derivations_erasurejob", "audit_deletionreceipt", "receipt_id"),
    ("derivations_summarysource", "derivations_summary", "summary_id"),
    ("derivations_summarysource", "records_fact", "fact_id"),
    ("records_conflict", "records_fact", "fact_id"),
    ("records_conflict", "records_memoryrecord", "contender_id"),
    ("records_conflict", "records_memoryrecord", "current_record_id"),
    ("records_conflict", "records_memoryrecord", "resolved_record_id"),
    ("records_fact", "records_memoryrecord", "current_id"),
    ("records_fact", "records_scope", "scope_id"),
    ("records_legalhold", "records_fact", "fact_id"),
    ("records_memoryrecord", "records_fact", "fact_id"),
    ("records_memoryrecord", "records_memoryrecord", "superseded_by_id"),
    ("records_memoryrecord", "records_memoryrecord", "supersedes_id"),
    ("records_observation", "records_memoryrecord", "record_id"),
    ("records_promotionevent", "records_memoryrecord", "record_id"),
    ("records_promotionevent", "records_promotionrequest", "request_id"),
    ("records_promotionrequest", "records_memoryrecord", "record_id"),
    ("records_reviewclaim", "records_conflict", "conflict_id"),
    ("records_reviewclaim", "records_promotionrequest", "request_id"),
    ("state_checkpoint", "state_run", "run_id"),
    ("state_episode", "state_run", "run_id"),
}
# What tenant-owned tables may point at beside each other: the tenants themselves and Django's
# users (people belong to several tenants): reference tables, copied to every shard.
REFERENCE_TABLES = {"auth_user", "tenancy_tenant"}


def test_every_tenant_table_is_keyed_and_referenced_by_tenant_or_listed(owner_connection: Any):
    tables = {row[0] for row in owner_connection.execute(TENANT_TABLES)}
    assert "records_memoryrecord" in tables
    keyed = {t for t, cols in owner_connection.execute(UNIQUE_KEYS) if "tenant_id" in cols}
    primary_keys = dict(owner_connection.execute(PRIMARY_KEY_TYPES).fetchall())

    assert tables - keyed == KEYED_BY_ID_ALONE, "update docs/scaling.md with the list"
    for table in KEYED_BY_ID_ALONE:
        assert len(primary_keys[table]) == 1, f"{table} is keyed by its id alone"

    id_alone = set()
    for source, target, columns in owner_connection.execute(FOREIGN_KEYS):
        if source not in tables:
            continue
        if target in tables:
            if "tenant_id" not in columns:
                assert len(primary_keys[target]) == 1, (source, target)
                id_alone.add((source, target, *columns))
        else:
            assert target in REFERENCE_TABLES, f"{source} points at {target}, owned by no tenant"
    assert id_alone == FOREIGN_KEYS_ON_ID_ALONE, "update docs/scaling.md with the list"
