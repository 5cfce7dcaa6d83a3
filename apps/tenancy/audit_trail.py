"""Tenancy's changes and cross-tenant reads go into the tenant's audit chain.

The chain is the audit app's, above tenancy, which receives ``signals.audit_append`` in its
``AppConfig.ready`` (apps/audit/receivers.py). The contract is required: no change goes
unaudited. The append runs in the caller's transaction, as the audit app's own
``audit_record`` does.
"""

from __future__ import annotations

import uuid
from typing import Any

from apps.core.actors import Actor

from . import signals
from .models import Tenant


def audit_record(
    *,
    tenant: Tenant | uuid.UUID,
    actor: Actor,
    action: str,
    object_type: str = "",
    object_id: str = "",
    data: dict[str, Any] | None = None,
) -> None:
    """Append one event to ``tenant``'s chain, in the caller's transaction."""
    signals.audit_append.results(
        tenant=tenant,
        actor=actor,
        action=action,
        object_type=object_type,
        object_id=object_id,
        data=data,
    )
