"""The shapes of the records API's responses that no model serializer renders, for the OpenAPI
schema. Each is checked against what the view answers (``tests/api/test_response_shapes.py``
and schemathesis in CI), so the two cannot drift apart unnoticed."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from apps.api.schema import PageLinkField, ProblemSerializer

from .serializers import (
    ActorColumnsField,
    ActorSerializer,
    ConfirmedBySerializer,
    FactSerializer,
    ObservationSerializer,
    PromotionEventSerializer,
    RecordSerializer,
    RecordWriteResponse,
    SourceSerializer,
    VersionSerializer,
)

COUNTS_HELP = "What was (or would be) removed, by kind: {kind: count}."


class FactsResponse(serializers.Serializer[Any]):
    """``GET /facts``: a page of the subject's current scoped facts, at ``as_of`` when given;
    the page envelope of every listing, with what the request asked about."""

    next = PageLinkField()
    previous = PageLinkField()
    results = FactSerializer(many=True)
    subject = serializers.CharField()
    as_of = serializers.DateTimeField(allow_null=True)
    deletions = serializers.ListField(
        child=serializers.UUIDField(),
        required=False,
        help_text="With `as_of` only: the deletion receipts of what the memory held then and "
        "has deleted since (the deleted versions themselves are not shown).",
    )


class HistoryResponse(serializers.Serializer[Any]):
    """``GET /records/{id}/history``: every version of the record's fact, oldest first."""

    record = serializers.UUIDField()
    versions = VersionSerializer(many=True)


class ProvenanceSerializer(serializers.Serializer[Any]):
    source = SourceSerializer()  # type: ignore[assignment]
    observed_at = serializers.DateTimeField()
    writer = ActorSerializer()
    owner = serializers.CharField()
    reason = serializers.CharField()
    observations = serializers.IntegerField(help_text="How many observations the record has.")


class DerivedSummarySerializer(serializers.Serializer[Any]):
    id = serializers.UUIDField()
    valid = serializers.BooleanField()
    created_at = serializers.DateTimeField()
    invalidated_reason = serializers.CharField(allow_null=True)


class EmbeddingSerializer(serializers.Serializer[Any]):
    """An embedding's model, dimension and date; never the vector."""

    model = serializers.CharField()
    dimension = serializers.IntegerField()
    created_at = serializers.DateTimeField()


class DerivedSerializer(serializers.Serializer[Any]):
    summaries = DerivedSummarySerializer(many=True, help_text="Summaries citing the record.")
    embeddings = EmbeddingSerializer(many=True)


class RecordDetail(RecordSerializer):
    """A record with its provenance chain, observations, version chain and derivations."""

    observations = ObservationSerializer(many=True)
    provenance = ProvenanceSerializer()
    promotion_events = PromotionEventSerializer(many=True)
    versions = VersionSerializer(many=True)
    derived = DerivedSerializer()


class DeletionReceiptSerializer(serializers.Serializer[Any]):
    """A deletion receipt: what was deleted, when, by whom and why; never the content."""

    id = serializers.UUIDField()
    kind = serializers.ChoiceField(choices=["record", "erasure", "expiry"])
    deleted_at = serializers.DateTimeField()
    requested_by = ActorColumnsField("requested_by")
    reason = serializers.CharField()
    fact = serializers.UUIDField(source="fact_id", allow_null=True)
    records = serializers.ListField(source="record_ids", child=serializers.UUIDField())
    counts = serializers.DictField(help_text=COUNTS_HELP)
    content_digest = serializers.CharField(allow_blank=True)
    reclaimed_at = serializers.DateTimeField(
        source="storage_reclaimed_at",
        allow_null=True,
        help_text="When the deleted rows were reclaimed from the tables.",
    )
    rewritten_at = serializers.DateTimeField(
        source="storage_rewritten_at",
        allow_null=True,
        help_text="When their bytes were rewritten out of every table file.",
    )


class DeletionPreviewSerializer(serializers.Serializer[Any]):
    """``?dry_run=true``: what the deletion would remove now; nothing is changed."""

    dry_run = serializers.BooleanField()
    record = serializers.UUIDField(allow_null=True)
    fact = serializers.UUIDField(allow_null=True)
    held = serializers.BooleanField(help_text="A legal hold keeps the record: it would refuse.")
    holds = serializers.ListField(child=serializers.UUIDField())
    counts = serializers.DictField(help_text=COUNTS_HELP)
    record_ids = serializers.ListField(child=serializers.UUIDField())
    summaries_invalidated = serializers.ListField(child=serializers.UUIDField())
    open_promotion_requests = serializers.ListField(child=serializers.UUIDField())
    open_conflicts = serializers.ListField(child=serializers.UUIDField())


class FactCheckResult(serializers.Serializer[Any]):
    id = serializers.CharField()
    version = serializers.IntegerField(allow_null=True)
    found = serializers.BooleanField()
    current = serializers.BooleanField()
    stale = serializers.BooleanField()
    reason = serializers.ChoiceField(
        choices=["superseded", "expired", "redacted", "deleted", "not_current"],
        allow_null=True,
        help_text="Why a stale version is stale; null when it is current or not found.",
    )
    status = serializers.CharField(allow_null=True)
    current_id = serializers.UUIDField(allow_null=True)
    current_version = serializers.IntegerField(allow_null=True)
    deletion_receipt = serializers.UUIDField(allow_null=True)
    detail = serializers.CharField(allow_null=True)
    trust = serializers.ChoiceField(
        choices=["provisional", "confirmed"],
        allow_null=True,
        help_text="The named version's trust; null when it is not found.",
    )
    confirmed_by = ConfirmedBySerializer(source="confirmation", allow_null=True)
    conflict = serializers.UUIDField(
        allow_null=True, help_text="The open conflict the named version takes part in."
    )
    in_conflict = serializers.BooleanField()
    safe_to_act = serializers.BooleanField(
        help_text="Current, in no open conflict, and at least the trust asked for (default "
        "confirmed). A value in open conflict stays current (and not stale) until a reviewer "
        "resolves it, but is not safe to act on."
    )
    unsafe_reasons = serializers.ListField(
        child=serializers.ChoiceField(choices=["not_found", "stale", "in_conflict", "provisional"]),
        help_text="Why it is not safe to act on; empty when it is.",
    )


class FactCheckResponse(serializers.Serializer[Any]):
    facts = FactCheckResult(many=True)
    stale = serializers.IntegerField(help_text="How many of the facts are stale.")
    unsafe = serializers.IntegerField(help_text="How many of the facts are not safe to act on.")


class ConsentRevocationSerializer(serializers.Serializer[Any]):
    consent_ref = serializers.CharField()
    revoked_at = serializers.DateTimeField()
    records_expired = serializers.IntegerField()


class BatchItemResult(serializers.Serializer[Any]):
    """One item's answer: ``record`` for a 2xx status, ``error`` for a 4xx one."""

    index = serializers.IntegerField(help_text="The item's place in `items`, from 0.")
    status = serializers.IntegerField(
        help_text="What POST /records would have answered this item: 201 (a new version or an "
        "observation), 200 (nothing changed), 400, 413 or 422 (refused, nothing stored); on a "
        "replay, 410 for a record deleted or expired since."
    )
    record = RecordWriteResponse(
        required=False, help_text="The record as POST /records answers it (2xx items)."
    )
    error = ProblemSerializer(
        required=False,
        help_text="The problem document POST /records would have answered (4xx items), "
        "`errors` naming fields by their path within the item; on a replay, a 410 item's is "
        "the IdempotencyTombstone problem (`id`, `state`, `first_status`).",
    )


class RecordBatchResponse(serializers.Serializer[Any]):
    """``POST /records/batch``: every item's answer, in the order of ``items``."""

    items = BatchItemResult(many=True)
    succeeded = serializers.IntegerField(help_text="Items answered 2xx.")
    failed = serializers.IntegerField(help_text="Items answered 4xx.")
