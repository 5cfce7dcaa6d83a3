"""JSON shapes of runs, episodes, checkpoints and obligations (API.md field names), and the
input contract of their operations (:mod:`apps.api.contract`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.api.contract import (
    IDENTIFIER_CHARS,
    NAME_CHARS,
    NON_BLANK_PATTERN,
    REASON_CHARS,
    STATE_BYTES,
    VALUE_BYTES,
    JSONValueField,
    PageQuery,
    QueryBooleanField,
    StrictCharField,
    StrictChoiceField,
    StrictIntegerField,
    StrictSerializer,
    StrictUUIDField,
    TimestampField,
)
from apps.records.serializers import actor_columns, owner_field, subject_field

from .models import Checkpoint, Episode, Obligation, ObligationState, Run, RunState
from .selectors import is_overdue

MAX_EPISODE_CHARS = 256 * 1024
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


@extend_schema_field(ActorOutput)
class ActorField(serializers.Field[Any, Any, Any, Any]):
    """The actor in a model's ``<prefix>_type``, ``_id`` and ``_label`` columns (null when
    none is stamped)."""

    def __init__(self, prefix: str, **kwargs: Any) -> None:
        self.prefix = prefix
        super().__init__(source="*", read_only=True, **kwargs)

    def to_representation(self, value: Any) -> dict[str, str] | None:
        return actor_columns(value, self.prefix) if getattr(value, f"{self.prefix}_type") else None


@extend_schema_field(ActorOutput(allow_null=True))
class NullableActorField(ActorField):
    """The same actor, declared nullable in the schema (a column that may be unstamped)."""


class RunSerializer(serializers.Serializer[Run]):
    id = serializers.UUIDField()
    task_id = serializers.CharField()
    owner = serializers.CharField()
    subject = serializers.CharField(help_text="Whom the run is about (empty: no one named).")
    state = serializers.CharField(help_text="open | closed")
    opened_at = serializers.DateTimeField()
    opened_by = ActorField("opened_by")
    closed_at = serializers.DateTimeField(allow_null=True)
    closed_by = NullableActorField("closed_by")
    episodes_discarded = serializers.IntegerField(
        help_text="How many episodes the close discarded (0 while open)."
    )
    records_expired = serializers.IntegerField(
        help_text="How many session records (source.run_id = this run) the close expired."
    )


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
    created_by = ActorField("created_by")
    committed_at = serializers.DateTimeField(allow_null=True)
    committed_by = NullableActorField("committed_by")
    ended_at = serializers.DateTimeField(
        allow_null=True, help_text="When it failed or was cancelled."
    )
    ended_by = NullableActorField("ended_by")
    end_reason = serializers.CharField(allow_blank=True)

    def get_overdue(self, obligation: Obligation) -> bool:
        return is_overdue(obligation)


class ObligationCreateResponse(ObligationSerializer):
    mismatched = serializers.ListField(
        child=serializers.CharField(),
        help_text="With 200 (the key already existed): the request's fields that differ from "
        "the existing obligation, which is returned unchanged. Empty with 201.",
    )


# --- input -------------------------------------------------------------------------------------


# A subject as records name theirs (``kind:id``), so an erasure by it finds both.
SUBJECT_EXPECTED = "Expected <kind>:<id>, e.g. user:8812."


class RunOpenInput(StrictSerializer):
    task_id = StrictCharField(max_length=IDENTIFIER_CHARS, help_text="The task this run works on.")
    owner = owner_field(
        "Expected user:<id>, service:<name>, team:<name>, tenant:<id> or agent:<id>.",
        help_text="Accountable principal: user:<id> | service:<name> | team:<name> | agent:<id>",
    )
    subject = subject_field(
        SUBJECT_EXPECTED,
        required=False,
        help_text="Whom the run is about, e.g. user:8812: erasing that subject erases the run.",
    )


class EpisodeInput(StrictSerializer):
    role = StrictCharField(
        max_length=50,
        help_text="What the trace is, e.g. user, assistant, tool, document, partial.",
    )
    content = StrictCharField(
        required=False,
        allow_blank=True,
        trim_whitespace=False,
        max_length=MAX_EPISODE_CHARS,
        too_large=True,
        help_text=f"The trace itself, at most {MAX_EPISODE_CHARS} characters (413 over it).",
    )
    content_ref = StrictCharField(
        required=False,
        allow_blank=True,
        max_length=500,
        help_text="Where the content lives instead (a URI or an id), when it is not sent.",
    )

    # content is kept as sent (a trace may be only whitespace); content_ref is trimmed, so
    # one of only whitespace is none.
    schema_rules: ClassVar[dict[str, Any]] = {
        "oneOf": [
            {
                "required": ["content"],
                "properties": {"content": {"type": "string", "minLength": 1}},
            },
            {
                "required": ["content_ref"],
                "properties": {"content_ref": {"type": "string", "pattern": NON_BLANK_PATTERN}},
            },
        ]
    }

    def cross_field_errors(self, data: Mapping[str, Any]) -> dict[str, list[str]]:
        content, ref = data.get("content"), data.get("content_ref")
        given_content = isinstance(content, str) and content != ""
        given_ref = isinstance(ref, str) and ref.strip() != ""
        if given_content == given_ref:
            return {"content": ["Give exactly one of content and content_ref."]}
        return {}


class CheckpointInput(StrictSerializer):
    step = StrictIntegerField(min_value=0, max_value=MAX_STEP)
    state = JSONValueField(
        max_bytes=STATE_BYTES,
        help_text=f"The run's state after this step (any JSON, at most {STATE_BYTES} bytes).",
    )


class ObligationInput(StrictSerializer):
    task_id = StrictCharField(max_length=IDENTIFIER_CHARS)
    kind = StrictCharField(max_length=NAME_CHARS, help_text="What the work is, e.g. charge.")
    key = StrictCharField(
        max_length=IDENTIFIER_CHARS,
        trim_whitespace=False,
        help_text="The idempotency key, derived from task and step identity.",
    )
    depends_on = serializers.ListField(
        child=StrictUUIDField(),
        required=False,
        max_length=MAX_DEPENDENCIES,
        help_text="Obligations (of this tenant) that must be committed before this one.",
    )
    deadline = TimestampField(required=False, allow_null=True, help_text="When it is due.")
    payload = JSONValueField(
        required=False,
        allow_null=True,
        max_bytes=VALUE_BYTES,
        help_text=f"What the work needs (any JSON, at most {VALUE_BYTES} bytes).",
    )
    subject = subject_field(
        SUBJECT_EXPECTED,
        required=False,
        help_text="Whom the work is about, e.g. user:8812: erasing that subject strips the "
        "payload, the result and this (key and state stay), as it strips an obligation whose "
        "payload or result mentions the subject.",
    )


class CommitInput(StrictSerializer):
    result = JSONValueField(
        required=False,
        allow_null=True,
        max_bytes=VALUE_BYTES,
        help_text=f"What the work produced (any JSON, at most {VALUE_BYTES} bytes).",
    )


class FailInput(CommitInput):
    reason = StrictCharField(required=False, allow_blank=True, max_length=REASON_CHARS)


class CancelInput(StrictSerializer):
    reason = StrictCharField(required=False, allow_blank=True, max_length=REASON_CHARS)


# --- query parameters -------------------------------------------------------------------------


class RunListQuery(PageQuery):
    task_id = StrictCharField(required=False, max_length=IDENTIFIER_CHARS)
    state = StrictChoiceField(choices=RunState.values, required=False)


class ObligationListQuery(PageQuery):
    task_id = StrictCharField(required=False, max_length=IDENTIFIER_CHARS)
    state = StrictChoiceField(choices=ObligationState.values, required=False)
    overdue = QueryBooleanField(
        required=False,
        help_text="true: pending obligations past their deadline; false: the others.",
    )
