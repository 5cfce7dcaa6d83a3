"""JSON shapes of runs, episodes, checkpoints and obligations (API.md field names), and the
request bodies with their field-level checks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.utils.dateparse import parse_datetime
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.records.validation import OWNER_RE, SUBJECT_RE, canonical_json, json_problem

from .models import Checkpoint, Episode, Obligation, Run
from .selectors import is_overdue

MAX_ID_CHARS = 200
MAX_EPISODE_CHARS = 256 * 1024
MAX_STATE_BYTES = 256 * 1024
MAX_PAYLOAD_BYTES = 64 * 1024
MAX_DEPENDENCIES = 100
MAX_STEP = 2**31 - 1


# --- output ------------------------------------------------------------------------------------


class ActorOutput(serializers.Serializer[dict[str, str]]):
    """Who did it: a person, an agent credential or the system (stamped by the server)."""

    type = serializers.CharField(help_text="user, credential or system")
    id = serializers.CharField()

    def get_fields(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
        # ``label`` cannot be a class attribute: it would shadow Field.label.
        fields = super().get_fields()
        fields["label"] = serializers.CharField()
        return fields


def _actor(obj: Any, prefix: str) -> dict[str, str] | None:
    kind = getattr(obj, f"{prefix}_type")
    if not kind:
        return None
    return {
        "type": kind,
        "id": getattr(obj, f"{prefix}_id"),
        "label": getattr(obj, f"{prefix}_label"),
    }


class RunSerializer(serializers.Serializer[Run]):
    id = serializers.UUIDField()
    task_id = serializers.CharField()
    owner = serializers.CharField()
    subject = serializers.CharField(help_text="Whom the run is about (empty: no one named).")
    state = serializers.CharField(help_text="open | closed")
    opened_at = serializers.DateTimeField()
    opened_by = serializers.SerializerMethodField()
    closed_at = serializers.DateTimeField(allow_null=True)
    closed_by = serializers.SerializerMethodField()
    episodes_discarded = serializers.IntegerField(
        help_text="How many episodes the close discarded (0 while open)."
    )
    records_expired = serializers.IntegerField(
        help_text="How many session records (source.run_id = this run) the close expired."
    )

    @extend_schema_field(ActorOutput)
    def get_opened_by(self, run: Run) -> dict[str, str] | None:
        return _actor(run, "opened_by")

    @extend_schema_field(ActorOutput(allow_null=True))
    def get_closed_by(self, run: Run) -> dict[str, str] | None:
        return _actor(run, "closed_by")


class EpisodeSerializer(serializers.Serializer[Episode]):
    id = serializers.UUIDField()
    run = serializers.UUIDField(source="run_id")
    seq = serializers.IntegerField(help_text="1, 2, ... in the order appended.")
    role = serializers.CharField()
    content = serializers.CharField(allow_blank=True)
    content_ref = serializers.CharField(allow_blank=True)
    created_at = serializers.DateTimeField()


class CheckpointSerializer(serializers.Serializer[Checkpoint]):
    id = serializers.UUIDField()
    run = serializers.UUIDField(source="run_id")
    step = serializers.IntegerField()
    state = serializers.JSONField()
    created_at = serializers.DateTimeField()


class ObligationSerializer(serializers.Serializer[Obligation]):
    id = serializers.UUIDField()
    task_id = serializers.CharField()
    kind = serializers.CharField()
    key = serializers.CharField(help_text="The idempotency key, unique in the tenant.")
    state = serializers.CharField(help_text="pending | committed | failed | cancelled")
    depends_on = serializers.ListField(child=serializers.UUIDField())
    deadline = serializers.DateTimeField(allow_null=True)
    overdue = serializers.SerializerMethodField()
    payload = serializers.JSONField()
    result = serializers.JSONField(allow_null=True)
    subject = serializers.CharField(help_text="Whom the work is about (empty: no one named).")
    created_at = serializers.DateTimeField()
    created_by = serializers.SerializerMethodField()
    committed_at = serializers.DateTimeField(allow_null=True)
    committed_by = serializers.SerializerMethodField()
    ended_at = serializers.DateTimeField(
        allow_null=True, help_text="When it failed or was cancelled."
    )
    ended_by = serializers.SerializerMethodField()
    end_reason = serializers.CharField(allow_blank=True)

    def get_overdue(self, obligation: Obligation) -> bool:
        return is_overdue(obligation)

    @extend_schema_field(ActorOutput)
    def get_created_by(self, obligation: Obligation) -> dict[str, str] | None:
        return _actor(obligation, "created_by")

    @extend_schema_field(ActorOutput(allow_null=True))
    def get_committed_by(self, obligation: Obligation) -> dict[str, str] | None:
        return _actor(obligation, "committed_by")

    @extend_schema_field(ActorOutput(allow_null=True))
    def get_ended_by(self, obligation: Obligation) -> dict[str, str] | None:
        return _actor(obligation, "ended_by")


class ObligationCreateResponse(ObligationSerializer):
    mismatched = serializers.ListField(
        child=serializers.CharField(),
        help_text="With 200 (the key already existed): the request's fields that differ from "
        "the existing obligation, which is returned unchanged. Empty with 201.",
    )


# --- input -------------------------------------------------------------------------------------


class StrictInput(serializers.Serializer[dict[str, Any]]):
    """A request body: a JSON object with only the documented members."""

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        unknown: dict[str, list[str]] = {}
        if isinstance(data, Mapping):
            names = sorted(str(name) for name in data if name not in self.fields)
            unknown = {name[:100]: ["Unknown field."] for name in names[:20]}
        try:
            result: dict[str, Any] = super().to_internal_value(data)
        except serializers.ValidationError as error:
            if unknown and isinstance(error.detail, dict):
                raise serializers.ValidationError({**error.detail, **unknown}) from error
            raise
        if unknown:
            raise serializers.ValidationError(unknown)
        return result


def _json_checked(value: Any, limit: int) -> Any:
    problem = json_problem(value)
    if problem:
        raise serializers.ValidationError(problem)
    if len(canonical_json(value).encode()) > limit:
        raise serializers.ValidationError(f"At most {limit // 1024} KiB of JSON.")
    return value


class ZonedDateTimeField(serializers.DateTimeField):
    """An RFC 3339 timestamp that names its zone; a naive one is ambiguous and refused."""

    default_error_messages = {"naive": "Give a zone, e.g. 2025-01-14T09:12:00Z."}

    def to_internal_value(self, value: Any) -> Any:
        if isinstance(value, str):
            try:
                parsed = parse_datetime(value)
            except ValueError:  # well-formed but impossible, e.g. month 13: the parent says so
                parsed = None
            if parsed is not None and parsed.tzinfo is None:
                self.fail("naive")
        return super().to_internal_value(value)


def subject_checked(value: str) -> str:
    """A subject as records name theirs (``kind:id``), so an erasure by it finds both."""
    if not SUBJECT_RE.match(value):
        raise serializers.ValidationError("Expected <kind>:<id>, e.g. user:8812.")
    return value


class RunOpenInput(StrictInput):
    task_id = serializers.CharField(
        max_length=MAX_ID_CHARS, help_text="The task this run works on."
    )
    owner = serializers.CharField(
        max_length=MAX_ID_CHARS,
        help_text="Accountable principal: user:<id> | service:<name> | team:<name> | agent:<id>",
    )

    subject = serializers.CharField(
        required=False,
        max_length=MAX_ID_CHARS,
        help_text="Whom the run is about, e.g. user:8812: erasing that subject erases the run.",
    )

    def validate_owner(self, value: str) -> str:
        if not OWNER_RE.match(value):
            raise serializers.ValidationError(
                "Expected user:<id>, service:<name>, team:<name>, tenant:<id> or agent:<id>."
            )
        return value

    def validate_subject(self, value: str) -> str:
        return subject_checked(value)


class EpisodeInput(StrictInput):
    role = serializers.CharField(
        max_length=50,
        help_text="What the trace is, e.g. user, assistant, tool, document, partial.",
    )
    content = serializers.CharField(
        required=False, allow_blank=True, trim_whitespace=False, max_length=MAX_EPISODE_CHARS
    )
    content_ref = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=500,
        help_text="Where the content lives instead (a URI or an id), when it is not sent.",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if bool(attrs.get("content")) == bool(attrs.get("content_ref")):
            raise serializers.ValidationError(
                {"content": ["Give exactly one of content and content_ref."]}
            )
        return attrs


class CheckpointInput(StrictInput):
    step = serializers.IntegerField(min_value=0, max_value=MAX_STEP)
    state = serializers.JSONField(help_text="The run's state after this step (any JSON).")

    def validate_state(self, value: Any) -> Any:
        return _json_checked(value, MAX_STATE_BYTES)


class ObligationInput(StrictInput):
    task_id = serializers.CharField(max_length=MAX_ID_CHARS)
    kind = serializers.CharField(max_length=100, help_text="What the work is, e.g. charge.")
    key = serializers.CharField(
        max_length=MAX_ID_CHARS,
        trim_whitespace=False,
        help_text="The idempotency key, derived from task and step identity.",
    )
    depends_on = serializers.ListField(
        child=serializers.UUIDField(),
        required=False,
        max_length=MAX_DEPENDENCIES,
        help_text="Obligations (of this tenant) that must be committed before this one.",
    )
    deadline = ZonedDateTimeField(required=False, allow_null=True)
    payload = serializers.JSONField(required=False, allow_null=True)
    subject = serializers.CharField(
        required=False,
        max_length=MAX_ID_CHARS,
        help_text="Whom the work is about, e.g. user:8812: erasing that subject strips the "
        "payload and result (key and state stay).",
    )

    def validate_payload(self, value: Any) -> Any:
        return _json_checked(value, MAX_PAYLOAD_BYTES)

    def validate_subject(self, value: str) -> str:
        return subject_checked(value)


class CommitInput(StrictInput):
    result = serializers.JSONField(
        required=False, allow_null=True, help_text="What the work produced (any JSON)."
    )

    def validate_result(self, value: Any) -> Any:
        return _json_checked(value, MAX_PAYLOAD_BYTES)


class FailInput(CommitInput):
    reason = serializers.CharField(required=False, allow_blank=True, max_length=2000)


class CancelInput(StrictInput):
    reason = serializers.CharField(required=False, allow_blank=True, max_length=2000)
