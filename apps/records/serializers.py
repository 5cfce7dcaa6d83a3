"""JSON shapes of records, facts, promotion requests and conflicts (API.md field names)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from .models import Conflict, MemoryRecord, Observation, PromotionEvent, PromotionRequest
from .validation import format_duration

# Fields named ``source``, ``fields`` or ``label`` (API.md names) shadow attributes of DRF's
# Field and Serializer classes in the type stubs; at runtime the serializer metaclass moves
# declared fields out of the class namespace, so the "type: ignore[assignment]" below are safe.


class SourceSerializer(serializers.Serializer[Any]):
    kind = serializers.CharField(source="source_kind")
    ref = serializers.CharField(source="source_ref")
    turn_id = serializers.CharField(source="source_turn_id", allow_blank=True)
    tool_call_id = serializers.CharField(source="source_tool_call_id", allow_blank=True)
    run_id = serializers.CharField(source="source_run_id", allow_blank=True)


class ActorSerializer(serializers.Serializer[Any]):
    type = serializers.CharField()
    id = serializers.CharField()
    label = serializers.CharField()  # type: ignore[assignment]


def _actor(obj: Any, prefix: str) -> dict[str, str]:
    return {
        "type": getattr(obj, f"{prefix}_type"),
        "id": getattr(obj, f"{prefix}_id"),
        "label": getattr(obj, f"{prefix}_label"),
    }


class ScopeSerializer(serializers.Serializer[Any]):
    domain = serializers.CharField(source="scope_domain")
    task_type = serializers.CharField(source="scope_task_type", allow_blank=True)
    conditions = serializers.JSONField(source="scope_conditions")


class RetentionSerializer(serializers.Serializer[Any]):
    basis = serializers.CharField(source="retention_basis")
    ttl = serializers.SerializerMethodField()
    consent_ref = serializers.CharField(allow_blank=True)

    def get_ttl(self, record: MemoryRecord) -> str | None:
        return format_duration(record.ttl_requested)


class RedactionSerializer(serializers.Serializer[Any]):
    state = serializers.CharField(source="redaction_state")
    fields = serializers.ListField(source="redaction_fields", child=serializers.CharField())  # type: ignore[assignment]


_MOMENT = serializers.DateTimeField()


def _moment(value: Any) -> Any:
    """A timestamp exactly as a declared ``DateTimeField`` renders it."""
    return _MOMENT.to_representation(value) if value else None


def _optional_id(value: Any) -> str | None:
    return str(value) if value is not None else None


def _source(obj: Any) -> dict[str, str]:
    return {
        "kind": str(obj.source_kind),
        "ref": str(obj.source_ref),
        "turn_id": str(obj.source_turn_id),
        "tool_call_id": str(obj.source_tool_call_id),
        "run_id": str(obj.source_run_id),
    }


class RecordSerializer(serializers.Serializer[MemoryRecord]):
    """A stored record, as every endpoint returns it."""

    id = serializers.UUIDField()
    version = serializers.IntegerField()
    key = serializers.CharField()
    subject = serializers.CharField()
    value = serializers.JSONField()
    content = serializers.CharField()
    source = SourceSerializer(source="*")  # type: ignore[assignment]
    observed_at = serializers.DateTimeField()
    written_at = serializers.DateTimeField()
    writer = serializers.SerializerMethodField()
    owner = serializers.CharField()
    reason = serializers.CharField()
    scope = ScopeSerializer(source="*")
    sensitivity = serializers.CharField()
    retention = RetentionSerializer(source="*")
    redaction = RedactionSerializer(source="*")
    trust = serializers.CharField()
    status = serializers.CharField()
    expires_at = serializers.DateTimeField(allow_null=True)
    supersedes = serializers.UUIDField(source="supersedes_id", allow_null=True)
    superseded_by = serializers.UUIDField(source="superseded_by_id", allow_null=True)
    superseded_at = serializers.DateTimeField(allow_null=True)
    conflict = serializers.SerializerMethodField()

    def get_writer(self, record: MemoryRecord) -> dict[str, str]:
        return _actor(record, "writer")

    def to_representation(self, instance: MemoryRecord) -> dict[str, Any]:
        """The declared fields, rendered directly: DRF's generic path deep-copies some forty
        field objects per record, most of the cost of a write's response. A field added
        above must be added here too (``tests/records/test_serializers.py`` compares the
        two renderings)."""
        record = instance
        return {
            "id": str(record.pk),
            "version": int(record.version),
            "key": str(record.key),
            "subject": str(record.subject),
            "value": record.value,
            "content": str(record.content),
            "source": _source(record),
            "observed_at": _moment(record.observed_at),
            "written_at": _moment(record.written_at),
            "writer": self.get_writer(record),
            "owner": str(record.owner),
            "reason": str(record.reason),
            "scope": {
                "domain": str(record.scope_domain),
                "task_type": str(record.scope_task_type),
                "conditions": record.scope_conditions,
            },
            "sensitivity": str(record.sensitivity),
            "retention": {
                "basis": str(record.retention_basis),
                "ttl": format_duration(record.ttl_requested),
                "consent_ref": str(record.consent_ref),
            },
            "redaction": {
                "state": str(record.redaction_state),
                "fields": [str(name) for name in record.redaction_fields],
            },
            "trust": str(record.trust),
            "status": str(record.status),
            "expires_at": _moment(record.expires_at),
            "supersedes": _optional_id(record.supersedes_id),
            "superseded_by": _optional_id(record.superseded_by_id),
            "superseded_at": _moment(record.superseded_at),
            "conflict": self.get_conflict(record),
        }

    def get_conflict(self, record: MemoryRecord) -> str | None:
        explicit = self.context.get("conflicts", {})
        if record.pk in explicit:
            value = explicit[record.pk]
            return str(value) if value else None
        value = getattr(record, "open_conflict_id", None)
        return str(value) if value else None


class ObservationSerializer(serializers.Serializer[Observation]):
    id = serializers.UUIDField()
    source = SourceSerializer(source="*")  # type: ignore[assignment]
    observed_at = serializers.DateTimeField()
    recorded_at = serializers.DateTimeField()
    writer = serializers.SerializerMethodField()
    reason = serializers.CharField()

    def get_writer(self, observation: Observation) -> dict[str, str]:
        return _actor(observation, "writer")


class VersionSerializer(serializers.Serializer[MemoryRecord]):
    id = serializers.UUIDField()
    version = serializers.IntegerField()
    value = serializers.JSONField()
    trust = serializers.CharField()
    status = serializers.CharField()
    written_at = serializers.DateTimeField()
    source = SourceSerializer(source="*")  # type: ignore[assignment]
    writer = serializers.SerializerMethodField()
    supersedes = serializers.UUIDField(source="supersedes_id", allow_null=True)
    superseded_by = serializers.UUIDField(source="superseded_by_id", allow_null=True)
    superseded_at = serializers.DateTimeField(allow_null=True)
    current_from = serializers.DateTimeField(allow_null=True)
    current_until = serializers.DateTimeField(allow_null=True)

    def get_writer(self, record: MemoryRecord) -> dict[str, str]:
        return _actor(record, "writer")


class PromotionEventSerializer(serializers.Serializer[PromotionEvent]):
    id = serializers.UUIDField()
    promoted_by = serializers.SerializerMethodField()
    evidence = serializers.JSONField()
    promoted_at = serializers.DateTimeField()
    request = serializers.UUIDField(source="request_id", allow_null=True)

    def get_promoted_by(self, event: PromotionEvent) -> dict[str, str]:
        return _actor(event, "promoted_by")


class PromotionRequestSerializer(serializers.Serializer[PromotionRequest]):
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

    def get_requested_by(self, request: PromotionRequest) -> dict[str, str]:
        return _actor(request, "requested_by")

    def get_decided_by(self, request: PromotionRequest) -> dict[str, str] | None:
        return _actor(request, "decided_by") if request.decided_by_type else None


class ConflictSerializer(serializers.Serializer[Conflict]):
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

    def get_resolver(self, conflict: Conflict) -> dict[str, str] | None:
        return _actor(conflict, "resolver") if conflict.resolver_type else None


class FactSerializer(serializers.Serializer[MemoryRecord]):
    """A fact as the state layer reads it: the current version of one key in one scope."""

    key = serializers.CharField()
    id = serializers.UUIDField()
    fact = serializers.UUIDField(source="fact_id")
    scope = ScopeSerializer(source="*")
    value = serializers.JSONField()
    version = serializers.IntegerField()
    trust = serializers.CharField()
    observed_at = serializers.DateTimeField()
    written_at = serializers.DateTimeField()
    source = SourceSerializer(source="*")  # type: ignore[assignment]
    expires_at = serializers.DateTimeField(allow_null=True)


# --- request bodies (for the OpenAPI schema; validation is apps.records.validation) -----------


class SourceInput(serializers.Serializer[Any]):
    kind = serializers.ChoiceField(
        choices=["interaction", "tool_call", "document", "user_action", "derived"]
    )
    ref = serializers.CharField()
    turn_id = serializers.CharField(required=False)
    tool_call_id = serializers.CharField(required=False)
    run_id = serializers.CharField(required=False)


class ScopeInput(serializers.Serializer[Any]):
    domain = serializers.CharField()
    task_type = serializers.CharField(required=False)
    conditions = serializers.DictField(required=False)


class RetentionInput(serializers.Serializer[Any]):
    basis = serializers.ChoiceField(choices=["session", "consent", "contract", "indefinite"])
    ttl = serializers.CharField(required=False, help_text="ISO 8601 duration, e.g. P30D")
    consent_ref = serializers.CharField(required=False)


class RedactionInput(serializers.Serializer[Any]):
    state = serializers.ChoiceField(
        choices=["none", "applied", "required"],
        required=False,
        help_text="required: the server rewrites the named parts of the value (and their text "
        "in content) to the marker [REDACTED] before anything is stored, embedded or queued; "
        "the record says applied. applied: each named part must already hold [REDACTED] (a "
        "400 naming it otherwise). none (default): no fields may be named.",
    )
    fields = serializers.ListField(  # type: ignore[assignment]
        child=serializers.CharField(),
        required=False,
        help_text="Dotted paths into the value, as POST /records/{id}/redact takes them: "
        "card.number (or value.card.number), items.0, value for the whole value. Each must "
        "name a part of the value; required with state applied or required.",
    )


class RecordWriteInput(serializers.Serializer[Any]):
    key = serializers.CharField(help_text="dotted name of the fact, e.g. shipping.preference")
    subject = serializers.CharField(help_text="whom or what the fact is about, e.g. user:8812")
    value = serializers.JSONField()
    content = serializers.CharField(required=False)
    source = SourceInput()  # type: ignore[assignment]
    observed_at = serializers.DateTimeField()
    owner = serializers.CharField(help_text="user:<id> | service:<name> | team:<name>")
    reason = serializers.CharField()
    scope = ScopeInput()
    sensitivity = serializers.ChoiceField(choices=["public", "internal", "personal", "restricted"])
    retention = RetentionInput()
    redaction = RedactionInput(required=False)
    vector = serializers.ListField(
        child=serializers.FloatField(),
        required=False,
        help_text="Only for a tenant whose embedding model is client-<dim>: the record's "
        "vector, exactly <dim> numbers usable as pgvector's 32-bit floats (each finite as a "
        "float32, the squared length neither 0 nor overflowing; a vector of length 1 always "
        "passes), stored as its embedding in the "
        "write's transaction (a 400 naming `vector` otherwise). Refused when the tenant's "
        "model computes vectors itself (hashing-<dim>, st-<model>).",
    )


class RecordWriteResponse(RecordSerializer):
    outcome = serializers.CharField(
        help_text="created | conflict | observed | unchanged. A value equal by JSON meaning "
        "(numbers by value: 1 is 1.0; true is not 1; object members in any order) to the "
        "current value or an open contender is an observation of it, never a conflict. "
        "unchanged: the same source observed the same value again (no new evidence)."
    )
    promotion_request = serializers.UUIDField(allow_null=True)
    notices = serializers.ListField(
        child=serializers.CharField(),
        help_text="What the server did beyond storing the body as given, in words: a ttl "
        "clipped to the class's rule; a re-observation at a higher sensitivity, which raised "
        "the record's class and shortened its expires_at to the new class's rule (never "
        "lengthened; audited as record.reclassify); a re-observation at a lower sensitivity, "
        "which changed nothing; a writer observing its own record.",
    )


class ReasonInput(serializers.Serializer[Any]):
    reason = serializers.CharField(required=False, allow_blank=True)


class DecisionInput(serializers.Serializer[Any]):
    """Approving or rejecting a promotion: the reason is kept with the decision."""

    reason = serializers.CharField(max_length=2000)


class PromotionRequestInput(serializers.Serializer[Any]):
    evidence = serializers.JSONField(required=False)
    reason = serializers.CharField()


class ConflictResolveInput(serializers.Serializer[Any]):
    resolution = serializers.ChoiceField(choices=["keep_current", "accept_new", "corrected"])
    value = serializers.JSONField(required=False)
    reason = serializers.CharField()


class FactCheckItem(serializers.Serializer[Any]):
    id = serializers.UUIDField()
    version = serializers.IntegerField(required=False, min_value=1)


class FactCheckInput(serializers.Serializer[Any]):
    facts = FactCheckItem(many=True)

    def validate_facts(self, value: list[Any]) -> list[Any]:
        if not value:
            raise serializers.ValidationError("At least one fact to check.")
        if len(value) > 500:
            raise serializers.ValidationError("At most 500 facts per check.")
        return value
