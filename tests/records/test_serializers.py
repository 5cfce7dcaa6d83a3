"""The record representation every endpoint returns: the declared fields of RecordSerializer
(which also document it in the OpenAPI schema), the same fresh from a write and read back."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework import serializers

from apps.core.actors import Actor
from apps.records import services
from apps.records.models import MemoryRecord
from apps.records.serializers import RecordSerializer, record_representation, write_input
from apps.tenancy.context import tenant_scope

from .factories import body

pytestmark = pytest.mark.django_db


def test_a_record_renders_every_declared_member(tenant) -> None:
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
        superseded_at = timezone.now()
        MemoryRecord.objects.filter(pk=first.record.pk).update(superseded_at=superseded_at)
        stored = MemoryRecord.objects.get(pk=first.record.pk)
    assert second.conflict is not None
    record = first.record
    expected = {
        "id": str(record.pk),
        "version": 1,
        "key": "shipping.preference",
        "subject": "user:8812",
        "value": {"email": "[REDACTED]"},
        "content": record.content,
        "source": {
            "kind": "tool_call",
            "ref": "tool:1",
            "turn_id": "",
            "tool_call_id": "call-9",
            "run_id": "",
        },
        "observed_at": record.observed_at.isoformat().replace("+00:00", "Z"),
        "written_at": record.written_at.isoformat().replace("+00:00", "Z"),
        "writer": {"type": "credential", "id": "c1", "label": "writer"},
        "owner": "user:alice",
        "reason": "applied in checkout flow",
        "scope": {"domain": "commerce", "task_type": "checkout", "conditions": {"region": "eu"}},
        "sensitivity": "personal",
        "retention": {"basis": "consent", "ttl": "P2DT3H", "consent_ref": "consent:42"},
        "redaction": {"state": "applied", "fields": ["value.email"]},
        "trust": "provisional",
        "status": "active",
        "expires_at": record.expires_at.isoformat().replace("+00:00", "Z"),
        "supersedes": None,
        "superseded_by": None,
        "superseded_at": None,
        "conflict": None,
    }
    assert dict(RecordSerializer(record).data) == expected
    # Read back from the database (the superseded moment set), and with its open conflict.
    conflicts = {"conflicts": {stored.pk: second.conflict.pk}}
    assert dict(RecordSerializer(stored, context=conflicts).data) == {
        **expected,
        "superseded_at": superseded_at.isoformat().replace("+00:00", "Z"),
        "conflict": str(second.conflict.pk),
    }
    assert set(expected) == set(RecordSerializer().fields)
    # RecordSerializer renders through record_representation (the hot path); DRF's own
    # rendering of the declared fields gives the same members, in the same order.
    with tenant_scope(tenant.pk):
        contender = MemoryRecord.objects.get(pk=second.record.pk)  # supersedes the first
    contender.ttl_requested = None  # no ttl asked for
    for item, context in (
        (record, {}),
        (stored, conflicts),
        (contender, {}),
        (contender, {"conflicts": {contender.pk: None}}),
    ):
        drf = serializers.Serializer.to_representation(RecordSerializer(context=context), item)
        fast = record_representation(item, conflicts=context.get("conflicts"))
        assert list(fast.items()) == list(drf.items())
        assert RecordSerializer(item, context=context).data == fast
    assert record.expires_at is not None
    assert record.expires_at - record.written_at <= timedelta(days=2, hours=3)
