"""Governance's rows: erasure jobs."""

from __future__ import annotations

import factory

from apps.governance.models import ErasureJob

from .base import TenantOwnedFactory, now


class ErasureJobFactory(TenantOwnedFactory[ErasureJob]):
    """A queued erasure by subject, asked for by a person."""

    selector = "subject"
    value = ""
    value_digest = ""
    reason = "asked"
    requested_by_type = "user"
    requested_by_label = "olivia"
    requested_at = factory.LazyFunction(now)

    class Meta:
        model = ErasureJob
