"""The shapes of the derivations API's responses (summaries, redaction, erasure, receipts), for
the OpenAPI schema. Each is checked against what the view answers
(``tests/api/test_response_shapes.py`` and schemathesis in CI)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from apps.records.responses import COUNTS_HELP, DeletionReceiptSerializer, EmbeddingSerializer
from apps.records.serializers import ActorSerializer, RecordSerializer


class SummarySourceSerializer(serializers.Serializer[Any]):
    type = serializers.ChoiceField(choices=["record", "episode"])
    id = serializers.UUIDField()


class InvalidationSerializer(serializers.Serializer[Any]):
    at = serializers.DateTimeField()
    reason = serializers.CharField()
    by_event = serializers.UUIDField(allow_null=True, help_text="The audit event that did it.")


class SummarySerializer(serializers.Serializer[Any]):
    """A summary; once a source changed it is invalid, its text gone, and says why."""

    id = serializers.UUIDField()
    text = serializers.CharField(allow_null=True, help_text="null once the summary is invalid.")
    reason = serializers.CharField()
    sensitivity = serializers.CharField()
    sources = SummarySourceSerializer(many=True)
    writer = ActorSerializer()
    created_at = serializers.DateTimeField()
    valid = serializers.BooleanField()
    invalidated = InvalidationSerializer(allow_null=True)
    embeddings = EmbeddingSerializer(many=True)


class RedactionResultSerializer(serializers.Serializer[Any]):
    fields = serializers.ListField(child=serializers.CharField())  # type: ignore[assignment]
    counts = serializers.DictField(help_text="What the redaction rewrote or invalidated.")


class RedactResponse(RecordSerializer):
    """The redacted record, and what the redaction changed."""

    redaction_result = RedactionResultSerializer()


class ReceiptSerializer(DeletionReceiptSerializer):
    parent = serializers.UUIDField(  # type: ignore[assignment]
        source="parent_id",
        allow_null=True,
        help_text="The erasure's receipt, for a receipt an erasure wrote.",
    )


class ReceiptDetailSerializer(ReceiptSerializer):
    children = serializers.IntegerField(
        source="children.count", help_text="How many receipts name this one as parent."
    )


class ErasureResultSerializer(serializers.Serializer[Any]):
    """An erasure done at once: its receipt, totals, and the per-fact receipts' ids."""

    id = serializers.UUIDField(source="receipt.pk", help_text="The erasure's receipt.")
    receipt = ReceiptSerializer()
    totals = serializers.DictField(help_text=COUNTS_HELP)
    receipts = serializers.ListField(source="receipt_ids", child=serializers.UUIDField())
    receipts_truncated = serializers.BooleanField(
        help_text="true: more receipts than listed; `GET /deletion-receipts?parent=<id>`."
    )


class ErasurePreviewSerializer(serializers.Serializer[Any]):
    """``dry_run: true``: the totals and ids the erasure would remove now; nothing changes."""

    dry_run = serializers.BooleanField()
    totals = serializers.DictField(help_text=COUNTS_HELP)
    fact_ids = serializers.ListField(child=serializers.UUIDField())
    record_ids = serializers.ListField(child=serializers.UUIDField())
    summaries_invalidated = serializers.ListField(child=serializers.UUIDField())
    ids_truncated = serializers.BooleanField()
