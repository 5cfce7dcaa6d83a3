"""JSON shapes of records, facts, promotion requests and conflicts (API.md field names), and
the input contract of their operations: the serializers that validate each request's body and
query and document them in the OpenAPI schema (:mod:`apps.api.contract`)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import timedelta
from typing import Any, ClassVar

from django.core.validators import RegexValidator
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.api.contract import (
    IDENTIFIER_CHARS,
    JSON_VALUE_SCHEMA,
    NAME_CHARS,
    NON_BLANK_PATTERN,
    REASON_CHARS,
    TOO_LARGE,
    VALUE_BYTES,
    JSONObjectField,
    JSONValueField,
    PageQuery,
    QueryBooleanField,
    QueryJSONObjectField,
    QuerySerializer,
    StrictCharField,
    StrictChoiceField,
    StrictIntegerField,
    StrictSerializer,
    StrictUUIDField,
    TimestampField,
    has_code,
)
from apps.core.problems import flatten_errors
from apps.core.validation import DURATION_RE, LONGEST_DURATION, format_duration

from . import signals
from .models import (
    ConflictState,
    MemoryRecord,
    Observation,
    PromotionEvent,
    PromotionState,
    RecordStatus,
    RedactionState,
    Resolution,
    RetentionBasis,
    Sensitivity,
    SourceKind,
    Trust,
)
from .trust import confirmed_by_json
from .validation import (
    CONDITIONS_BYTES,
    CONSENT_REF_MESSAGE,
    CONSENT_REF_RE,
    KEY_MESSAGE,
    KEY_RE,
    MAX_CONTENT_CHARS,
    MAX_VALUE_BYTES,
    OWNER_MESSAGE,
    OWNER_RE,
    RUN_ID_RE,
    SCOPE_NAME_MESSAGE,
    SCOPE_NAME_RE,
    SERVER_FIELDS,
    SUBJECT_MESSAGE,
    SUBJECT_RE,
    RecordInput,
    WriteRejected,
    identifier_normalised,
    redaction_at_write,
    ttl_parse,
)

# A duration as the schema states it: DURATION_RE (without its group names, which only Python
# reads), longer than zero. That it is at most LONGEST_DURATION the description says.
TTL_PATTERN = "^(?=.*[1-9])" + re.sub(r"\(\?P<\w+>", "(?:", DURATION_RE.pattern)[1:]

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


def actor_columns(obj: Any, prefix: str) -> dict[str, str]:
    """An actor stored as three columns (`{prefix}_type`, `_id`, `_label`), as the API shows it."""
    return {
        "type": getattr(obj, f"{prefix}_type"),
        "id": getattr(obj, f"{prefix}_id"),
        "label": getattr(obj, f"{prefix}_label"),
    }


@extend_schema_field(ActorSerializer)
class ActorColumnsField(serializers.Field):  # type: ignore[type-arg]
    """An :class:`ActorSerializer` read from the ``<prefix>_type``, ``<prefix>_id`` and
    ``<prefix>_label`` columns a model keeps an actor in."""

    def __init__(self, prefix: str, **kwargs: Any) -> None:
        self.prefix = prefix
        super().__init__(source="*", **kwargs)

    def to_representation(self, value: Any) -> dict[str, str]:
        return actor_columns(value, self.prefix)


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
    expires_at = serializers.DateTimeField(
        allow_null=True,
        help_text="observed_at (or written_at, if observed_at was ahead of the server's clock) "
        "plus the shorter of retention.ttl and the tenant's rule for the record's class and "
        "trust; null: no end.",
    )
    supersedes = serializers.UUIDField(source="supersedes_id", allow_null=True)
    superseded_by = serializers.UUIDField(source="superseded_by_id", allow_null=True)
    superseded_at = serializers.DateTimeField(allow_null=True)
    conflict = serializers.SerializerMethodField()

    def get_writer(self, record: MemoryRecord) -> dict[str, str]:
        return actor_columns(record, "writer")

    def get_conflict(self, record: MemoryRecord) -> str | None:
        explicit = self.context.get("conflicts", {})
        if record.pk in explicit:
            value = explicit[record.pk]
            return str(value) if value else None
        value = getattr(record, "open_conflict_id", None)
        return str(value) if value else None

    def to_representation(self, instance: MemoryRecord) -> dict[str, Any]:
        # The fields above are the contract and the schema; the rendering is
        # record_representation's, which tests/records/test_serializers.py holds equal to
        # DRF's field by field (it is the records' hot path: a search renders ten).
        return record_representation(instance, conflicts=self.context.get("conflicts"))


_DATETIME = serializers.DateTimeField()  # DRF's own rendering of a moment (ISO 8601, in UTC)


def _moment(value: Any) -> str | None:
    return None if value is None else _DATETIME.to_representation(value)


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def record_representation(
    record: MemoryRecord, *, conflicts: Mapping[Any, Any] | None = None
) -> dict[str, Any]:
    """A record as :class:`RecordSerializer` renders it (the same members in the same order),
    built directly: DRF walks some forty bound fields per record, which was a sixth of a
    search's time (docs/performance.md, "Request path"). ``conflicts``: the open conflict of
    each record by id, where known (else the record's ``open_conflict_id``)."""
    if conflicts is not None and record.pk in conflicts:
        conflict = conflicts[record.pk]
    else:
        conflict = getattr(record, "open_conflict_id", None)
    return {
        "id": _text(record.id),
        "version": None if record.version is None else int(record.version),
        "key": _text(record.key),
        "subject": _text(record.subject),
        "value": record.value,
        "content": _text(record.content),
        "source": {
            "kind": _text(record.source_kind),
            "ref": _text(record.source_ref),
            "turn_id": _text(record.source_turn_id),
            "tool_call_id": _text(record.source_tool_call_id),
            "run_id": _text(record.source_run_id),
        },
        "observed_at": _moment(record.observed_at),
        "written_at": _moment(record.written_at),
        "writer": actor_columns(record, "writer"),
        "owner": _text(record.owner),
        "reason": _text(record.reason),
        "scope": {
            "domain": _text(record.scope_domain),
            "task_type": _text(record.scope_task_type),
            "conditions": record.scope_conditions,
        },
        "sensitivity": _text(record.sensitivity),
        "retention": {
            "basis": _text(record.retention_basis),
            "ttl": format_duration(record.ttl_requested),
            "consent_ref": _text(record.consent_ref),
        },
        "redaction": {
            "state": _text(record.redaction_state),
            "fields": None
            if record.redaction_fields is None
            else [_text(name) for name in record.redaction_fields],
        },
        "trust": _text(record.trust),
        "status": _text(record.status),
        "expires_at": _moment(record.expires_at),
        "supersedes": _text(record.supersedes_id),
        "superseded_by": _text(record.superseded_by_id),
        "superseded_at": _moment(record.superseded_at),
        "conflict": str(conflict) if conflict else None,
    }


class ObservationSerializer(serializers.Serializer[Observation]):
    id = serializers.UUIDField()
    source = SourceSerializer(source="*")  # type: ignore[assignment]
    observed_at = serializers.DateTimeField()
    recorded_at = serializers.DateTimeField()
    writer = serializers.SerializerMethodField()
    reason = serializers.CharField()

    def get_writer(self, observation: Observation) -> dict[str, str]:
        return actor_columns(observation, "writer")


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
        return actor_columns(record, "writer")


class PromotionEventSerializer(serializers.Serializer[PromotionEvent]):
    id = serializers.UUIDField()
    promoted_by = serializers.SerializerMethodField()
    evidence = serializers.JSONField()
    promoted_at = serializers.DateTimeField()
    request = serializers.UUIDField(source="request_id", allow_null=True)

    def get_promoted_by(self, event: PromotionEvent) -> dict[str, str]:
        return actor_columns(event, "promoted_by")


class ConfirmedBySerializer(serializers.Serializer[Any]):
    """Who confirmed a version (its latest promotion); null while it is provisional."""

    kind = serializers.ChoiceField(
        choices=["person", "credential", "observation"],
        help_text="person: a reviewer in the console (or a person's correction); credential: "
        "an agent credential with the review action; observation: a second independent "
        "observation of the same value, under the tenant's auto_promote_on_second_observation.",
    )
    id = serializers.CharField(
        help_text="The person's or the credential's id; for an observation, the observation's."
    )
    label = serializers.CharField(help_text="The person's username or the credential's name.")  # type: ignore[assignment]
    at = serializers.DateTimeField(help_text="When it was confirmed.")
    promotion_event = serializers.UUIDField()


class DecisionTrustFields:
    """What an agent needs besides the value to decide whether to act on it: the open
    conflict (the same id as a record's ``conflict``) and who confirmed it. A serializer using
    it declares ``conflict``, ``in_conflict`` and ``confirmed_by`` as method fields; its
    records must have been through ``apps.records.trust.decision_trust_annotate``."""

    @extend_schema_field(serializers.UUIDField(allow_null=True))
    def get_conflict(self, record: MemoryRecord) -> str | None:
        value = record.open_conflict_id  # type: ignore[attr-defined]
        return str(value) if value else None

    @extend_schema_field(
        serializers.BooleanField(
            help_text="An open conflict contradicts this value: a reviewer has not settled "
            "which value holds, so it is not one to act on irreversibly."
        )
    )
    def get_in_conflict(self, record: MemoryRecord) -> bool:
        return record.open_conflict_id is not None  # type: ignore[attr-defined]

    @extend_schema_field(ConfirmedBySerializer(allow_null=True))
    def get_confirmed_by(self, record: MemoryRecord) -> dict[str, Any] | None:
        return confirmed_by_json(record.confirmation)  # type: ignore[attr-defined]


class FactSerializer(DecisionTrustFields, serializers.Serializer[MemoryRecord]):
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
    conflict = serializers.SerializerMethodField()
    in_conflict = serializers.SerializerMethodField()
    confirmed_by = serializers.SerializerMethodField()


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


# --- request bodies: the input contract (apps.api.contract) ----------------------------------


def _regex(pattern: re.Pattern[str], message: str) -> RegexValidator:
    return RegexValidator(pattern, message=message)


def key_field(**kwargs: Any) -> StrictCharField:
    """A fact's key: a dotted name, at most 200 characters."""
    return StrictCharField(
        max_length=IDENTIFIER_CHARS, validators=[_regex(KEY_RE, KEY_MESSAGE)], **kwargs
    )


class IdentifierField(StrictCharField):
    """A subject or an owner, in any script: stored and compared in one spelling
    (:func:`~apps.records.validation.identifier_normalised`)."""

    def to_internal_value(self, data: Any) -> str:
        return identifier_normalised(super().to_internal_value(data))


def subject_field(**kwargs: Any) -> StrictCharField:
    """A subject, ``kind:identifier``, at most 200 characters."""
    return IdentifierField(
        max_length=IDENTIFIER_CHARS, validators=[_regex(SUBJECT_RE, SUBJECT_MESSAGE)], **kwargs
    )


def owner_field(**kwargs: Any) -> StrictCharField:
    """An accountable principal, ``user:<id>`` and the like, at most 200 characters."""
    return IdentifierField(
        max_length=IDENTIFIER_CHARS, validators=[_regex(OWNER_RE, OWNER_MESSAGE)], **kwargs
    )


def scope_name_field(**kwargs: Any) -> StrictCharField:
    """A scope domain or task type, at most 100 characters."""
    return StrictCharField(
        max_length=NAME_CHARS, validators=[_regex(SCOPE_NAME_RE, SCOPE_NAME_MESSAGE)], **kwargs
    )


def _optional_text(max_length: int = IDENTIFIER_CHARS, **kwargs: Any) -> StrictCharField:
    """An optional string; empty or null is the same as absent."""
    return StrictCharField(
        required=False, allow_blank=True, allow_null=True, max_length=max_length, **kwargs
    )


def _given(data: Mapping[str, Any], name: str) -> bool:
    """Whether ``data`` gives ``name`` a non-empty string."""
    value = data.get(name)
    return isinstance(value, str) and bool(value.strip())


class SourceInput(StrictSerializer):
    kind = StrictChoiceField(choices=SourceKind.values)
    ref = StrictCharField(max_length=300, help_text="What produced it, e.g. interaction:4821.")
    turn_id = _optional_text()
    tool_call_id = _optional_text()
    run_id = _optional_text(help_text="The run it belongs to; required with retention session.")


class ScopeInput(StrictSerializer):
    domain = scope_name_field()
    task_type = _optional_text(NAME_CHARS, validators=[_regex(SCOPE_NAME_RE, SCOPE_NAME_MESSAGE)])
    conditions = JSONObjectField(
        required=False,
        allow_null=True,
        max_bytes=CONDITIONS_BYTES,
        too_large=False,
        help_text=f"The conditions it was observed under (at most {CONDITIONS_BYTES} bytes).",
    )


@extend_schema_field(
    {
        "type": "string",
        "format": "duration",
        "example": "P30D",
        "pattern": TTL_PATTERN,
        "description": "ISO 8601: PnW, or PnDTnHnMn.fS (seconds to 6 decimals); no years or "
        f"months, no sign, no empty T; longer than zero, at most {LONGEST_DURATION.days} days.",
    }
)
class TTLField(serializers.Field):  # type: ignore[type-arg]
    """A retention lifetime as an ISO 8601 duration, read exactly as it is echoed."""

    default_error_messages = {"invalid": "An ISO 8601 duration greater than zero, e.g. P30D."}

    def to_internal_value(self, data: Any) -> timedelta:
        if not isinstance(data, str):
            self.fail("invalid")
        parsed, problem = ttl_parse(data)
        if parsed is None:
            raise serializers.ValidationError(problem)
        return parsed

    def to_representation(self, value: Any) -> Any:
        return format_duration(value)


class RetentionInput(StrictSerializer):
    basis = StrictChoiceField(choices=RetentionBasis.values)
    ttl = TTLField(
        required=False,
        allow_null=True,
        help_text="The requested lifetime; the tenant's rule for the class may shorten it.",
    )
    consent_ref = _optional_text(
        validators=[_regex(CONSENT_REF_RE, CONSENT_REF_MESSAGE)],
        help_text="Required with basis consent: one identifier (no spaces), as the consent's "
        "revocation will name it.",
    )

    schema_rules: ClassVar[dict[str, Any]] = {
        "anyOf": [
            {"properties": {"basis": {"not": {"enum": [RetentionBasis.CONSENT.value]}}}},
            {
                "required": ["consent_ref"],
                "properties": {"consent_ref": {"type": "string", "pattern": NON_BLANK_PATTERN}},
            },
        ]
    }

    def cross_field_errors(self, data: Mapping[str, Any]) -> dict[str, list[str]]:
        if data.get("basis") == RetentionBasis.CONSENT and not _given(data, "consent_ref"):
            return {"consent_ref": ["Required when retention.basis is consent."]}
        return {}


class FieldNamesField(serializers.ListField):
    """Dotted paths into the value, reported as one field: "a list of field names"."""

    default_error_messages = {"invalid": "Must be a list of field names (1 to 200 characters)."}

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(child=StrictCharField(max_length=IDENTIFIER_CHARS), **kwargs)

    def to_internal_value(self, data: Any) -> list[str]:
        try:
            names: list[str] = super().to_internal_value(data)
        except serializers.ValidationError:
            self.fail("invalid")
        return names


class RedactionInput(StrictSerializer):
    state = StrictChoiceField(
        choices=RedactionState.values,
        required=False,
        help_text="required: the server rewrites the named parts of the value (and their text "
        "in content) to the marker [REDACTED] before anything is stored, embedded or queued; "
        "the record says applied. applied: each named part must already hold [REDACTED] (a "
        "400 naming it otherwise). none (default): no fields may be named.",
    )
    fields = FieldNamesField(  # type: ignore[assignment]
        required=False,
        max_length=100,
        help_text="Dotted paths into the value, as POST /records/{id}/redact takes them: "
        "card.number (or value.card.number), items.0, value for the whole value. Each must "
        "name a part of the value; required with state applied or required.",
    )

    schema_rules: ClassVar[dict[str, Any]] = {
        "anyOf": [
            {
                "properties": {
                    "state": {
                        "not": {
                            "enum": [RedactionState.APPLIED.value, RedactionState.REQUIRED.value]
                        }
                    },
                    "fields": {"maxItems": 0},
                }
            },
            {
                "required": ["state", "fields"],
                "properties": {
                    # Not "enum": drf-spectacular would take it for the field's choices.
                    "state": {"type": "string", "not": {"enum": [RedactionState.NONE.value]}},
                    "fields": {"type": "array", "minItems": 1},
                },
            },
        ]
    }


#: The write's member for an agent's own vector (for a tenant whose embedding model is
#: ``client-<dim>``).
VECTOR_FIELD = "vector"


@extend_schema_field({"type": "array", "items": {"type": "number"}})
class VectorField(serializers.Field):  # type: ignore[type-arg]
    """An agent's vector for a ``client-<dim>`` tenant. The field is the write contract's;
    what a vector must be, and where it is stored, are the derivations app's, above records:
    it receives ``signals.client_vector_check`` (here) and ``signals.client_vector_store``
    (:func:`apps.records.api.client_vector_store`) in its ``AppConfig.ready``
    (apps/derivations/receivers.py)."""

    def to_internal_value(self, data: Any) -> list[float]:
        tenant = self.context.get("tenant")
        if tenant is None:
            raise serializers.ValidationError("Vectors are taken through the API only.")
        vector: list[float] | None = None
        errors: list[str] = []
        for checked, refused in signals.client_vector_check.results(raw=data, tenant=tenant):
            vector = vector if checked is None else checked
            errors += refused
        if errors:
            raise serializers.ValidationError(errors)
        assert vector is not None
        return vector

    def to_representation(self, value: Any) -> Any:
        return value


class RecordWriteInput(StrictSerializer):
    """A memory write. Every failing field is named at once (400; 413 when the value or the
    content is over its size) and nothing is stored. A member the server sets (writer,
    trust, status, version, id, written_at, expires_at, supersedes) is refused with why."""

    # The redaction the write declares is applied in validate(): the validated data is the
    # RecordInput to store (with the vector, if any).

    unknown_field_messages = SERVER_FIELDS

    key = key_field(help_text="dotted name of the fact, e.g. shipping.preference")
    subject = subject_field(help_text="whom or what the fact is about, e.g. user:8812")
    value = JSONValueField(
        max_bytes=MAX_VALUE_BYTES,
        error_messages={"null": "Must not be null; delete the record to forget a value."},
        help_text=f"Any JSON, at most {MAX_VALUE_BYTES} bytes as compact JSON (413 over it).",
    )
    content = StrictCharField(
        required=False,
        allow_null=True,
        max_length=MAX_CONTENT_CHARS,
        too_large=True,
        error_messages={"blank": "Must not be empty when given."},
        help_text="The text that is searched; defaults to a rendering of key and value.",
    )
    source = SourceInput()  # type: ignore[assignment]
    observed_at = TimestampField(past=True, help_text="When it was observed; not in the future.")
    owner = owner_field(
        help_text="user:<id> | service:<name> | team:<name> | tenant:<slug> | agent:<id>",
    )
    reason = StrictCharField(max_length=REASON_CHARS, help_text="The decision it should inform.")
    scope = ScopeInput()
    sensitivity = StrictChoiceField(choices=Sensitivity.values)
    retention = RetentionInput()
    redaction = RedactionInput(required=False, allow_null=True)
    vector = VectorField(
        required=False,
        allow_null=True,
        help_text="Only for a tenant whose embedding model is client-<dim>: the record's "
        "vector, exactly <dim> numbers usable as pgvector's 32-bit floats (each finite as a "
        "float32, the squared length neither 0 nor overflowing; a vector of length 1 always "
        "passes), stored as its embedding in the "
        "write's transaction (a 400 naming `vector` otherwise). Refused when the tenant's "
        "model computes vectors itself (hashing-<dim>, st-<model>).",
    )

    schema_rules: ClassVar[dict[str, Any]] = {
        "anyOf": [
            {
                "properties": {
                    "retention": {
                        "properties": {"basis": {"not": {"enum": [RetentionBasis.SESSION.value]}}}
                    }
                }
            },
            {
                "properties": {
                    "source": {
                        "required": ["run_id"],
                        "properties": {
                            "run_id": {
                                "type": "string",
                                "format": "uuid",
                                "pattern": RUN_ID_RE.pattern,
                            }
                        },
                    }
                }
            },
        ]
    }

    def cross_field_errors(self, data: Mapping[str, Any]) -> dict[str, list[str]]:
        retention, source = data.get("retention"), data.get("source")
        if (
            isinstance(retention, Mapping)
            and retention.get("basis") == RetentionBasis.SESSION
            and isinstance(source, Mapping)
            and not _given(source, "run_id")
        ):
            return {
                "source.run_id": [
                    "Required when retention.basis is session (the run it ends with)."
                ]
            }
        return {}

    def validate(self, attrs: dict[str, Any]) -> Any:
        source, scope, retention = attrs["source"], attrs["scope"], attrs["retention"]
        redaction = attrs.get("redaction") or {}
        try:
            value, content, state, fields = redaction_at_write(
                key=attrs["key"],
                value=attrs["value"],
                content=attrs.get("content") or "",
                state=redaction.get("state") or RedactionState.NONE.value,
                fields=list(dict.fromkeys(redaction.get("fields") or [])),
            )
        except WriteRejected as rejected:
            raise serializers.ValidationError(rejected.errors) from rejected
        return {
            "record": RecordInput(
                key=attrs["key"],
                subject=attrs["subject"],
                value=value,
                content=content,
                source_kind=source["kind"],
                source_ref=source["ref"],
                source_turn_id=source.get("turn_id") or "",
                source_tool_call_id=source.get("tool_call_id") or "",
                source_run_id=source.get("run_id") or "",
                observed_at=attrs["observed_at"],
                owner=attrs["owner"],
                reason=attrs["reason"],
                scope_domain=scope["domain"],
                scope_task_type=scope.get("task_type") or "",
                scope_conditions=scope.get("conditions") or {},
                sensitivity=attrs["sensitivity"],
                retention_basis=retention["basis"],
                ttl=retention.get("ttl"),
                consent_ref=retention.get("consent_ref") or "",
                redaction_state=state,
                redaction_fields=fields,
            ),
            "vector": attrs.get("vector"),
        }


def _known_paths(serializer: serializers.Serializer[Any], prefix: str = "") -> set[str]:
    paths: set[str] = set()
    for name, field in serializer.fields.items():
        path = f"{prefix}{name}"
        paths.add(path)
        if isinstance(field, serializers.Serializer):
            paths |= _known_paths(field, f"{path}.")
    return paths


# Every field path a rejection may name that the contract itself defines. Any other path comes
# from a member name the client made up, which is submitted content (it may be an email
# address): the audit counts such paths instead of keeping them.
KNOWN_PATHS = frozenset({"body"} | set(SERVER_FIELDS) | _known_paths(RecordWriteInput()))


def audit_field_names(errors: dict[str, list[str]]) -> dict[str, Any]:
    """What the audit keeps of a rejection: the contract's field paths, and only a count of
    the member names the client invented."""
    known = sorted(path for path in errors if path in KNOWN_PATHS)
    unknown = len(errors) - len(known)
    return {"fields": known, "unknown_fields": unknown} if unknown else {"fields": known}


def write_input(body: Any, *, tenant: Any = None, now: Any = None) -> RecordInput:
    """A write body checked by :class:`RecordWriteInput`, outside a request (the console,
    the demo data, tests): the :class:`RecordInput` to pass to ``record_write``, or
    :class:`WriteRejected` naming every failing field. A vector is taken only with ``tenant``."""
    context = {"tenant": tenant, "now": now}
    serializer = RecordWriteInput(data=body, context=context)
    if not serializer.is_valid():
        detail = serializer.errors
        raise WriteRejected(flatten_errors(detail), too_large=has_code(detail, TOO_LARGE))
    record: RecordInput = serializer.validated_data["record"]
    return record


class RecordDeleteInput(StrictSerializer):
    """Why the record is deleted; optional (or ``?reason=``, not both). Kept on the deletion
    receipt and in the audit event. Nothing else: a dry run is the query parameter
    ``?dry_run=true``."""

    reason = StrictCharField(
        required=False,
        max_length=REASON_CHARS,
        help_text="Kept on the deletion receipt and in the audit event.",
    )

    unknown_field_messages: ClassVar[dict[str, str]] = {
        "dry_run": "Not a body member: a dry run is the query parameter ?dry_run=true. "
        "Nothing was deleted.",
    }


class DecisionInput(StrictSerializer):
    """Approving or rejecting a promotion: the reason is kept with the decision."""

    reason = StrictCharField(max_length=REASON_CHARS)


class PromotionRequestInput(StrictSerializer):
    evidence = JSONValueField(
        required=False,
        allow_null=True,
        help_text=f"What confirms it (any JSON, at most {VALUE_BYTES} bytes).",
    )
    reason = StrictCharField(max_length=REASON_CHARS)


class ConflictResolveInput(StrictSerializer):
    resolution = StrictChoiceField(
        choices=[Resolution.KEEP_CURRENT, Resolution.ACCEPT_NEW, Resolution.CORRECTED]
    )
    value = JSONValueField(
        required=False,
        allow_null=True,
        max_bytes=MAX_VALUE_BYTES,
        help_text="The corrected value, as a write's value: required with corrected, refused "
        "with keep_current and accept_new (each keeps a value already written).",
    )
    reason = StrictCharField(max_length=REASON_CHARS)

    schema_rules: ClassVar[dict[str, Any]] = {
        "anyOf": [
            {
                "properties": {
                    "resolution": {"not": {"enum": [Resolution.CORRECTED.value]}},
                    # Null only (OpenAPI 3.0 has no "type": "null"): no other JSON type.
                    "value": {
                        "nullable": True,
                        "not": {
                            "anyOf": [
                                {"type": name}
                                for name in ("string", "number", "boolean", "object", "array")
                            ]
                        },
                    },
                }
            },
            {
                "required": ["value"],
                "properties": {
                    # Not "enum": [corrected]: drf-spectacular would make that the whole enum.
                    "resolution": {
                        "not": {
                            "enum": [Resolution.KEEP_CURRENT.value, Resolution.ACCEPT_NEW.value]
                        }
                    },
                    "value": JSON_VALUE_SCHEMA,
                },
            },
        ]
    }

    # What each resolution that takes no value keeps instead, for the refusal of one.
    KEEPS: ClassVar[dict[str, str]] = {
        Resolution.KEEP_CURRENT: "keep_current keeps the current version's value",
        Resolution.ACCEPT_NEW: "accept_new keeps the contender's value",
    }

    def cross_field_errors(self, data: Mapping[str, Any]) -> dict[str, list[str]]:
        resolution, value = data.get("resolution"), data.get("value")
        if resolution == Resolution.CORRECTED and value is None:
            return {"value": ["Required when resolution is corrected."]}
        if isinstance(resolution, str) and resolution in self.KEEPS and value is not None:
            # Dropping it silently would let a caller believe its value was stored.
            return {
                "value": [
                    f"Only with resolution corrected: {self.KEEPS[resolution]} and stores no "
                    f"other. Send corrected to store this value, or leave value out."
                ]
            }
        return {}


class FactCheckItem(StrictSerializer):
    id = StrictUUIDField()
    version = StrictIntegerField(required=False, allow_null=True, min_value=1)


class FactCheckInput(StrictSerializer):
    facts = FactCheckItem(many=True, max_length=500, min_length=1)  # type: ignore[call-arg]
    trust = StrictChoiceField(
        choices=Trust.values,
        required=False,
        allow_null=True,
        help_text="The least trust the caller will act on (default confirmed: what an "
        "irreversible step needs). provisional: a provisional version is safe_to_act too, "
        "for a step that can be undone.",
    )


BATCH_MAX_ITEMS = 500


class BatchItemsField(serializers.ListField):
    """``items`` of a batch: 1 to :data:`BATCH_MAX_ITEMS` write bodies, each as ``POST
    /records`` takes it. Only the list is checked here; each item is validated on its own by
    the batch (apps/records/batch_api.py), so that one bad item refuses itself, not the rest."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("child", RecordWriteInput())
        super().__init__(
            min_length=1,
            max_length=BATCH_MAX_ITEMS,
            error_messages={
                "not_a_list": "A list of write bodies, each as POST /api/v1/records takes it.",
                "empty": f"Give 1 to {BATCH_MAX_ITEMS} items.",
                "min_length": f"Give 1 to {BATCH_MAX_ITEMS} items.",
                "max_length": f"At most {BATCH_MAX_ITEMS} items per batch; send the rest in "
                "another request.",
            },
            allow_empty=False,
            **kwargs,
        )

    def run_child_validation(self, data: list[Any]) -> list[Any]:
        return list(data)


class RecordBatchInput(StrictSerializer):
    """Up to 500 memory writes in one request. Each item is exactly a ``POST /records`` body
    and is answered on its own, in order: a refused item stores nothing, the others are
    written."""

    items = BatchItemsField(
        help_text=f"1 to {BATCH_MAX_ITEMS} write bodies; over or under that the whole request "
        "is a 400 naming `items` and nothing is written."
    )


# --- query parameters ---------------------------------------------------------------------------


class RecordListQuery(PageQuery):
    subject = subject_field(required=False)
    key = key_field(required=False)
    domain = scope_name_field(required=False)
    task_type = scope_name_field(required=False)
    trust = StrictChoiceField(choices=Trust.values, required=False)
    status = StrictChoiceField(choices=RecordStatus.values, required=False)
    sensitivity = StrictChoiceField(choices=Sensitivity.values, required=False)


class RecordDeleteQuery(QuerySerializer):
    reason = StrictCharField(
        required=False,
        max_length=REASON_CHARS,
        help_text="Kept on the deletion receipt and in the audit event (or give it in the body, "
        "not both).",
    )
    dry_run = QueryBooleanField(
        required=False,
        help_text="true: what the deletion would remove (counts and ids); nothing is changed. "
        "Only `true` or `false` (anything else is a 400).",
    )


class PromotionListQuery(PageQuery):
    state = StrictChoiceField(choices=PromotionState.values, required=False)


class ConflictListQuery(PageQuery):
    state = StrictChoiceField(choices=ConflictState.values, required=False)


class FactsQuery(PageQuery):
    subject = subject_field()
    domain = scope_name_field(required=False)
    task_type = scope_name_field(required=False)
    conditions = QueryJSONObjectField(
        required=False, help_text='A JSON object, by containment, e.g. {"region":"eu"}.'
    )
    as_of = TimestampField(
        required=False, past=True, help_text="What the memory held at that moment (not ahead)."
    )
    trust = StrictChoiceField(
        choices=Trust.values,
        required=False,
        help_text="confirmed: only facts whose current value is confirmed (what an irreversible "
        "step may act on); a fact whose current value is provisional is left out, not replaced "
        "by an older version.",
    )
    fresh = QueryBooleanField(
        required=False,
        help_text="true: read the primary database, never a read replica that may lag behind "
        "(only matters where replicas are configured: docs/scaling.md). Only `true` or `false`.",
    )
