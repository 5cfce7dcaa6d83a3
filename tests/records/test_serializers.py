"""The record representation is rendered by hand (for speed); it must stay exactly what DRF
renders from the declared fields, which also document it in the OpenAPI schema."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework import serializers

from apps.core.actors import Actor
from apps.records import services
from apps.records.models import MemoryRecord
from apps.records.serializers import RecordSerializer, write_input
from apps.tenancy.context import tenant_scope

from .factories import body

pytestmark = pytest.mark.django_db


def _declared(record: MemoryRecord, context: dict[str, object] | None = None) -> object:
    """The generic DRF rendering of the declared fields."""
    serializer = RecordSerializer(context=context or {})
    return serializers.Serializer.to_representation(serializer, record)


def test_the_hand_rendering_matches_the_declared_fields(tenant) -> None:
    actor = Actor("credential", "c1", "writer")
    overrides = {
        "redaction": {"state": "applied", "fields": ["value.email"]},
        "retention": {"basis": "consent", "consent_ref": "consent:42", "ttl": "P2DT3H"},
        "source": {"kind": "tool_call", "ref": "tool:1", "tool_call_id": "call-9"},
    }
    with tenant_scope(tenant.pk):
        first = services.record_write(
            tenant=tenant,
            actor=actor,
            data=write_input(body(value={"email": "[REDACTED]"}, **overrides)),
        )
        second = services.record_write(
            tenant=tenant,
            actor=actor,
            data=write_input(body(value={"email": "[REDACTED]", "carrier": "other"}, **overrides)),
        )
        # Optional members set, as a superseded version has them.
        MemoryRecord.objects.filter(pk=first.record.pk).update(
            superseded_at=timezone.now(), expires_at=timezone.now() + timedelta(days=1)
        )
        stored = [MemoryRecord.objects.get(pk=o.record.pk) for o in (first, second)]
    assert second.conflict is not None
    # Fresh from the write (Python values, enums) and read back from the database.
    for record in [first.record, second.record, *stored]:
        for context in ({}, {"conflicts": {record.pk: second.conflict.pk}}):
            rendered = RecordSerializer(record, context=context).data
            assert dict(rendered) == _declared(record, context)
    assert set(RecordSerializer(stored[0]).data) == set(RecordSerializer().fields)
