"""Tenancy's changes and cross-tenant reads go into the tenant's audit chain.

The chain is the audit app's, above tenancy (an audit event belongs to a tenant), so it
registers its append in its ``AppConfig.ready`` (apps/audit/apps.py). A tenancy change with
nothing registered raises: no change goes unaudited. The append runs in the caller's
transaction, as the audit app's own ``audit_record`` does.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from apps.core.actors import Actor

from .models import Tenant

# audit_record of apps.audit.services, once the audit app is ready.
_append: list[Callable[..., Any]] = []


def audit_append_register(append: Callable[..., Any]) -> None:
    _append[:] = [append]


def audit_record(
    *,
    tenant: Tenant | uuid.UUID,
    actor: Actor,
    action: str,
    object_type: str = "",
    object_id: str = "",
    data: dict[str, Any] | None = None,
) -> Any:
    """Append one event to ``tenant``'s chain, in the caller's transaction."""
    if not _append:
        raise LookupError("No app keeps the audit chain: apps.audit is not installed.")
    return _append[0](
        tenant=tenant,
        actor=actor,
        action=action,
        object_type=object_type,
        object_id=object_id,
        data=data,
    )
