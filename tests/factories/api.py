"""Stored responses of ``Idempotency-Key`` retries."""

from __future__ import annotations

import uuid

import factory

from apps.api.models import IdempotencyKey

from .base import TenantOwnedFactory, now


class IdempotencyKeyFactory(TenantOwnedFactory[IdempotencyKey]):
    """A stored ``200`` of a credential's keyed request (pass the ``credential_id``)."""

    credential_id = factory.LazyFunction(uuid.uuid4)
    key = factory.Sequence(lambda n: f"k-{n}")
    request_hash = "0" * 64
    status_code = 200
    response_body = factory.LazyFunction(dict)
    created_at = factory.LazyFunction(now)

    class Meta:
        model = IdempotencyKey
