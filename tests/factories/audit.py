"""Audit events, the heads of the chain's lanes, and deletion receipts."""

from __future__ import annotations

from typing import Any

import factory

from apps.audit.models import AuditChainHead, AuditEvent, DeletionReceipt
from apps.audit.services import GENESIS, audit_record
from apps.tenancy.context import tenant_scope

from .base import SYSTEM, TenantOwnedFactory, now, tenant_id_of


class AuditEventFactory(TenantOwnedFactory[AuditEvent]):
    """An event appended to its tenant's chain by ``audit_record`` (linked and hashed: a
    bare row would break the chain). ``actor`` is an :class:`~apps.audit.services.Actor`."""

    actor = SYSTEM
    action = "test.event"
    object_type = "record"
    object_id = factory.Sequence(lambda n: f"object-{n}")
    data = factory.LazyFunction(dict)

    class Meta:
        model = AuditEvent

    @classmethod
    def _build(cls, model_class: type[AuditEvent], *args: Any, **kwargs: Any) -> AuditEvent:
        raise TypeError("an audit event exists only appended to its chain: create it")

    @classmethod
    def _create(cls, model_class: type[AuditEvent], *args: Any, **kwargs: Any) -> AuditEvent:
        with tenant_scope(tenant_id_of(kwargs)):
            return audit_record(**kwargs)


class AuditChainHeadFactory(TenantOwnedFactory[AuditChainHead]):
    """A lane of a tenant's chain, opened and empty."""

    lane = factory.Sequence(lambda n: n)
    hash = GENESIS

    class Meta:
        model = AuditChainHead


class DeletionReceiptFactory(TenantOwnedFactory[DeletionReceipt]):
    """The receipt of a person's deletion of one record."""

    kind = "record"
    requested_by_type = "user"
    requested_by_label = "olivia"
    reason = "asked"
    deleted_at = factory.LazyFunction(now)
    record_ids = factory.LazyFunction(list)
    counts = factory.LazyFunction(lambda: {"records": 1})

    class Meta:
        model = DeletionReceipt
