"""The review items the API answers with: promotion requests and conflicts, each with who
holds it in the console."""

from __future__ import annotations

from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.records.models import Conflict, PromotionRequest
from apps.records.serializers import RecordSerializer, actor_columns

from .claims import claim_in_force


class ClaimFields:
    """Who holds a review item in the console, and until when (``claimed_by``,
    ``claimed_until``): a serializer using it declares both as method fields, and its items
    come with their claim (``select_related("claim")``)."""

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_claimed_by(self, item: PromotionRequest | Conflict) -> str | None:
        claim = claim_in_force(item, timezone.now())
        return claim.holder_label if claim else None

    @extend_schema_field({"type": "string", "format": "date-time", "nullable": True})
    def get_claimed_until(self, item: PromotionRequest | Conflict) -> str | None:
        claim = claim_in_force(item, timezone.now())
        return serializers.DateTimeField().to_representation(claim.expires_at) if claim else None


class PromotionRequestSerializer(ClaimFields, serializers.Serializer[PromotionRequest]):
    id = serializers.UUIDField()
    record = serializers.UUIDField(source="record_id")
    state = serializers.CharField()
    evidence = serializers.JSONField()
    reason = serializers.CharField()
    requested_by = serializers.SerializerMethodField()
    requested_at = serializers.DateTimeField()
    decided_by = serializers.SerializerMethodField()
    decided_at = serializers.DateTimeField(allow_null=True)
    decision_reason = serializers.CharField()
    claimed_by = serializers.SerializerMethodField(
        help_text="The person working on it in the console, while a claim lasts (a decision "
        "by anyone else is a 409 until then); null when no one holds it."
    )
    claimed_until = serializers.SerializerMethodField(
        help_text="When that claim ends (it ends sooner when released or decided); null when "
        "no one holds it."
    )

    def get_requested_by(self, request: PromotionRequest) -> dict[str, str]:
        return actor_columns(request, "requested_by")

    def get_decided_by(self, request: PromotionRequest) -> dict[str, str] | None:
        return actor_columns(request, "decided_by") if request.decided_by_type else None


class ConflictSerializer(ClaimFields, serializers.Serializer[Conflict]):
    id = serializers.UUIDField()
    state = serializers.CharField()
    subject = serializers.CharField(source="fact.subject")
    key = serializers.CharField(source="fact.key")
    current = RecordSerializer(source="current_record")
    contender = RecordSerializer()
    opened_at = serializers.DateTimeField()
    resolution = serializers.CharField(allow_blank=True)
    resolved_record = serializers.UUIDField(source="resolved_record_id", allow_null=True)
    resolver = serializers.SerializerMethodField()
    reason = serializers.CharField(allow_blank=True)
    resolved_at = serializers.DateTimeField(allow_null=True)
    claimed_by = serializers.SerializerMethodField(
        help_text="The person working on it in the console, while a claim lasts (a resolution "
        "by anyone else is a 409 until then); null when no one holds it."
    )
    claimed_until = serializers.SerializerMethodField(
        help_text="When that claim ends (it ends sooner when released or resolved); null when "
        "no one holds it."
    )

    def get_resolver(self, conflict: Conflict) -> dict[str, str] | None:
        return actor_columns(conflict, "resolver") if conflict.resolver_type else None
