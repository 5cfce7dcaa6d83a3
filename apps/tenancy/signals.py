"""What the tenancy app asks of the apps above it (contracts: apps/core/contracts.py)."""

from __future__ import annotations

from apps.core.contracts import Contract

#: ``tenant``, ``actor``, ``action``, ``object_type``, ``object_id``, ``data`` -> the event
#: appended to ``tenant``'s chain in the caller's transaction. The chain is the audit app's,
#: above tenancy (an audit event belongs to a tenant): apps/audit/receivers.py.
audit_append = Contract(
    "tenancy.audit_append",
    required="every change to a tenant, its members and credentials is audited",
)
