"""The input contract of every API operation: DRF serializers that validate and document.

Each API view (:class:`ContractView`) names, per HTTP method, the serializer of its query
parameters (``query_input``) and of its JSON body (``body_input``). The same classes validate
the request at run time, before the operation looks anything up, and generate the OpenAPI
schema (:mod:`apps.api.schema` reads them), so the schema and the check cannot drift apart.
A method that names no query serializer accepts no query parameter; one that names no body
serializer accepts no body at all, whatever its method (a ``DELETE`` or ``GET`` included) and
content type, but an empty one (or ``{}``, which names nothing).

The rules every operation shares:

* **Nothing unknown.** :class:`StrictSerializer` refuses a member it does not declare, at every
  nesting level, naming its path (``scope.domian``); so does a query parameter. A destructive
  call with a misspelt option (``?dryrun=true``) never falls through to its default.
* **No coercion.** The fields below take JSON's own types only: ``5`` is not a string, ``"5"``
  is not a number, ``1`` and ``"true"`` are not booleans, a number is not an id. In a query
  string (where everything is text) a boolean is ``true`` or ``false``, an integer is digits,
  and a parameter appears once.
* **One text-limit policy** (:data:`LIMITS`, documented in ``docs/api.md``): identifiers 200
  characters, names 100, reasons 2,000; content has a size per field and, over it, the request
  is a ``413`` naming the field (as the whole body over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` is).
* **Errors by path**: ``{"source.kind": [...], "facts[0].id": [...]}`` (:func:`flatten_errors`).
"""

from __future__ import annotations

import copy
import json
import math
import re
import threading
from collections.abc import Mapping
from contextvars import ContextVar
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, cast

from django.core.validators import (
    MaxLengthValidator,
    ProhibitNullCharactersValidator,
    RegexValidator,
)
from django.http import QueryDict
from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.exceptions import ErrorDetail, ParseError, UnsupportedMediaType
from rest_framework.request import Request
from rest_framework.settings import api_settings
from rest_framework.validators import ProhibitSurrogateCharactersValidator as SurrogateValidator
from rest_framework.views import APIView

from apps.core.errors import Invalid
from apps.core.pagination import PAGE_SIZE_DEFAULT, PAGE_SIZE_LIMIT
from apps.core.problems import flatten_errors
from apps.core.validation import json_body_problems, json_loads, unstorable_text

# --- the text-limit policy --------------------------------------------------------------------

IDENTIFIER_CHARS = 200  # keys, subjects, owners, task ids, references to things
NAME_CHARS = 100  # scope domains and task types, kinds of work
REASON_CHARS = 2000  # every reason, on every operation that takes one
QUERY_TEXT_CHARS = 2000  # a search's query text

# What a JSON value may weigh, as compact JSON (UTF-8 bytes); over it, 413.
VALUE_BYTES = 64 * 1024
STATE_BYTES = 256 * 1024

TOO_LARGE = "too_large"

# The client's clock may run ahead of ours by this much; a timestamp that claims to be in the
# past (observed_at, as_of) and is further ahead is refused.
CLOCK_SKEW = timedelta(seconds=30)


# What the OpenAPI schema says of a text field (apps.api.schema), as patterns that ECMAScript
# and Python read alike: no NUL anywhere (no text column can hold it) and, where a blank is
# refused, one character that is not whitespace as str.strip() counts it (what a trimmed field
# removes; spelled out, since ECMAScript's \s is another set). A field that takes a blank says
# so beside the pattern (drf-spectacular adds ``"maxLength": 0`` as the other of ``oneOf``).
_WHITESPACE = r"\t-\r\u001c-\u0020\u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
NO_NUL_PATTERN = r"^[^\u0000]+$"
NON_BLANK_PATTERN = rf"^[^\u0000]*[^\u0000{_WHITESPACE}][^\u0000]*$"


def json_size(value: Any) -> int:
    """Bytes of ``value`` as compact JSON, the measure of every size limit on JSON."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return len(text.encode("utf-8", "surrogatepass"))


# --- strict fields ------------------------------------------------------------------------------


class StrictCharField(serializers.CharField):
    """A JSON string, never a number turned into one. ``max_length`` is in characters;
    with ``too_large=True`` a longer string is content over its size: a ``413``."""

    default_error_messages = {
        "invalid": "Must be a string.",
        "blank": "Must not be empty.",
        "whitespace": "Must not be only whitespace.",
        "max_length": "At most {max_length} characters.",
        "min_length": "At least {min_length} characters.",
        "null": "Must not be null.",
    }

    def __init__(self, *, too_large: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        validators = []
        for validator in self.validators:
            if isinstance(validator, ProhibitNullCharactersValidator | SurrogateValidator):
                continue  # checked in to_internal_value, at C speed (a 64 Ki-character text)
            if too_large and isinstance(validator, MaxLengthValidator):
                validator = ContentSizeValidator(validator.limit_value, message=validator.message)
            validators.append(validator)
        self.validators = validators

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        if problem := unstorable_text(data):
            raise serializers.ValidationError(problem)
        # The length of the text as sent, as the schema's maxLength counts it: trimming comes
        # after, and a string over the limit by its surrounding whitespace is over it.
        for validator in self.validators:
            if isinstance(validator, MaxLengthValidator):
                validator(data)
        value: str = super().to_internal_value(data)
        if not self.allow_blank and not self.trim_whitespace and not value.strip():
            # Kept as sent (its whitespace may matter), but a blank is still refused.
            self.fail("whitespace")
        return value

    def schema_constraints(self) -> dict[str, Any]:
        """What the OpenAPI schema adds to this field's string: ``minLength`` where a blank
        is refused, and a pattern saying what else is (a field with its own pattern refuses
        NUL and blanks by it)."""
        constraints: dict[str, Any] = {}
        if not self.allow_blank:
            constraints["minLength"] = max(1, self.min_length or 0)
        if not any(isinstance(v, RegexValidator) for v in self.validators):
            constraints["pattern"] = NO_NUL_PATTERN if self.allow_blank else NON_BLANK_PATTERN
        return constraints


class ContentSizeValidator(MaxLengthValidator):
    """A length limit on content: over it the request is a 413, not a 400."""

    code = TOO_LARGE


class StrictIntegerField(serializers.IntegerField):
    """A JSON integer: ``5`` or ``5.0``, never ``"5"`` nor ``true``."""

    default_error_messages = {
        "invalid": "Must be an integer (a JSON number, not a string).",
        "max_value": "At most {max_value}.",
        "min_value": "At least {min_value}.",
        "null": "Must not be null.",
    }

    def to_internal_value(self, data: Any) -> int:
        if not _json_number(data) or (isinstance(data, float) and not data.is_integer()):
            self.fail("invalid")
        return int(data)


def _json_number(data: Any) -> bool:
    """A JSON number, finite (``true`` is not one, nor is ``"5"``)."""
    if isinstance(data, bool) or not isinstance(data, int | float):
        return False
    return isinstance(data, int) or math.isfinite(data)


class StrictFloatField(serializers.FloatField):
    """A finite JSON number, never a string."""

    default_error_messages = {
        "invalid": "Must be a number (a JSON number, not a string).",
        "max_value": "At most {max_value}.",
        "min_value": "At least {min_value}.",
        "null": "Must not be null.",
    }

    def to_internal_value(self, data: Any) -> float:
        if not _json_number(data):
            self.fail("invalid")
        return float(data)


class StrictBooleanField(serializers.BooleanField):
    """A JSON boolean: ``true`` or ``false``, never ``1`` nor ``"true"``."""

    default_error_messages = {"invalid": "Must be a JSON boolean: true or false."}

    def to_internal_value(self, data: Any) -> bool:
        if data is True or data is False:
            return data
        self.fail("invalid")


class StrictChoiceField(serializers.ChoiceField):
    """One of the given strings, exactly (case included)."""

    default_error_messages = {
        "invalid_choice": "Must be one of: {choices}.",
        "null": "Must not be null.",
    }

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str) or data not in self.choice_strings_to_values:
            self.fail("invalid_choice", choices=", ".join(self.choice_strings_to_values))
        return str(self.choice_strings_to_values[data])


class StrictUUIDField(serializers.UUIDField):
    """An id as a string (``"5"`` is not one, nor is the number 5)."""

    default_error_messages = {"invalid": "Must be an id (a UUID string).", "null": "Not null."}

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


# RFC 3339 date-time: a full date, "T", a full time with an optional fraction (to the
# microsecond, what is stored), and a zone. Not on the first day of year 1 ahead of UTC, nor on
# the last day of 9999 behind it: such a moment has no UTC time within the years 1 to 9999,
# which is what is stored. The OpenAPI schema states this same pattern.
RFC3339 = re.compile(
    r"^(?!0000|0001-01-01[Tt][^+-]*\+(?!00:00)|9999-12-31[Tt][^+-]*-(?!00:00))"
    r"\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])[Tt]([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d{1,6})?"
    r"([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d)$"
)


def parse_timestamp(raw: Any) -> datetime | None:
    """An RFC 3339 timestamp with a zone, in UTC; None for anything else (a date alone, no
    zone, an impossible date, a moment outside what can be stored)."""
    if not isinstance(raw, str) or not RFC3339.fullmatch(raw):
        return None
    try:
        return datetime.fromisoformat(raw.upper().replace("Z", "+00:00")).astimezone(UTC)
    except ValueError:  # a day the month does not have
        return None


@extend_schema_field({"type": "string", "format": "date-time", "pattern": RFC3339.pattern})
class TimestampField(serializers.Field[Any, Any, Any, Any]):
    """An RFC 3339 timestamp with a zone (``2025-01-14T09:12:00Z``), returned in UTC.

    ``past=True``: a moment the client says has happened (``observed_at``, ``as_of``); one
    further ahead of the server's clock than :data:`CLOCK_SKEW` is refused."""

    default_error_messages = {
        "invalid": "Must be an RFC 3339 timestamp with a zone, e.g. 2025-01-14T09:12:00Z.",
        "future": "Must not be in the future (the server allows a clock skew of {skew} s).",
        "null": "Must not be null.",
    }

    def __init__(self, *, past: bool = False, **kwargs: Any) -> None:
        self.past = past
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> datetime:
        parsed = parse_timestamp(data)
        if parsed is None:
            self.fail("invalid")
        if self.past:
            now = self.context.get("now") or timezone.now()
            if parsed > now + CLOCK_SKEW:
                self.fail("future", skew=int(CLOCK_SKEW.total_seconds()))
        return parsed

    def to_representation(self, value: Any) -> Any:
        return serializers.DateTimeField().to_representation(value)


def _unstorable(data: Any) -> None:
    """Refuse what no database column can hold (NUL, unpaired surrogates, infinite
    numbers), named by its path inside the value. The JSON parser refuses them already; this
    keeps the field complete wherever its input comes from (the console, the demo)."""
    problems = json_body_problems(data)
    if problems:
        root = problems.pop("body", None)
        raise serializers.ValidationError(root if root else problems)


# Any JSON value but null, in the OpenAPI schema: an optional member says ``nullable`` beside it.
JSON_VALUE_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"type": "object", "additionalProperties": {}},
        {"type": "array", "items": {}},
        {"type": "string"},
        {"type": "number"},
        {"type": "boolean"},
    ]
}


@extend_schema_field(JSON_VALUE_SCHEMA)
class JSONValueField(serializers.JSONField):
    """Any JSON value of at most ``max_bytes`` as compact JSON. Over it: a ``413`` (content
    over its size), or a ``400`` with ``too_large=False`` (a part of a fact's identity)."""

    default_error_messages = {
        "too_large": "At most {max_bytes} bytes as JSON (got {size}).",
        "null": "Must not be null.",
    }

    def __init__(self, *, max_bytes: int = VALUE_BYTES, too_large: bool = True, **kwargs: Any):
        self.max_bytes = max_bytes
        self.too_large = too_large
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> Any:
        _unstorable(data)
        size = json_size(data)
        if size > self.max_bytes:
            raise serializers.ValidationError(
                self.error_messages["too_large"].format(max_bytes=self.max_bytes, size=size),
                code=TOO_LARGE if self.too_large else "max_bytes",
            )
        return data


@extend_schema_field({"type": "object", "additionalProperties": {}})
class JSONObjectField(JSONValueField):
    """A JSON object with free-form members, of at most ``max_bytes``."""

    default_error_messages = {"not_an_object": "Must be a JSON object."}

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, dict):
            self.fail("not_an_object")
        return super().to_internal_value(data)


# --- query-string fields (everything arrives as text) ------------------------------------------


class QueryBooleanField(serializers.BooleanField):
    """``true`` or ``false``, lower case; ``1``, ``yes``, ``True`` and empty are refused."""

    default_error_messages = {"invalid": "Must be true or false (lower case)."}

    def to_internal_value(self, data: Any) -> bool:
        if data in ("true", "false"):
            return bool(data == "true")
        self.fail("invalid")


class QueryIntegerField(serializers.IntegerField):
    """Decimal digits, within the bounds."""

    default_error_messages = {
        "invalid": "Must be a whole number written in digits.",
        "max_value": "At most {max_value}.",
        "min_value": "At least {min_value}.",
    }

    def to_internal_value(self, data: Any) -> int:
        if not isinstance(data, str) or not re.fullmatch(r"[0-9]{1,9}", data):
            self.fail("invalid")
        return int(data)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


@extend_schema_field({"type": "object", "additionalProperties": {}})
class QueryJSONObjectField(serializers.Field[Any, Any, Any, Any]):
    """A JSON object written in the query string, e.g. ``{"region":"eu"}``, of at most
    :data:`QUERY_JSON_CHARS` characters. The OpenAPI schema declares the parameter as JSON
    content (apps.api.schema)."""

    # Braces doubled: DRF formats its messages.
    default_error_messages = {
        "invalid": 'Must be a JSON object, e.g. {{"region": "eu"}}.',
        "too_long": "At most {limit} characters of JSON.",
    }

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        try:
            value = json_loads(data, parse_constant=_no_constant) if isinstance(data, str) else None
        except ValueError:
            value = None
        if not isinstance(value, dict):
            self.fail("invalid")
        if len(data) > QUERY_JSON_CHARS:
            self.fail("too_long", limit=QUERY_JSON_CHARS)
        _unstorable(value)  # a NUL escaped as \u0000, an unpaired surrogate, a member twice
        return value

    def to_representation(self, value: Any) -> Any:
        return json.dumps(value)


QUERY_JSON_CHARS = 4096


# --- serializers ------------------------------------------------------------------------------


def _holds_child(field: Any) -> bool:
    return hasattr(field, "child") or isinstance(field, serializers.ListSerializer)


def _fresh_copy(field: Any) -> Any:
    """A shallow copy of a declared field, without what a nested serializer caches once
    bound (its own bound fields), so each copy binds its own."""
    copied = copy.copy(field)
    copied.__dict__.pop("fields", None)
    return copied


class StrictSerializer(serializers.Serializer[dict[str, Any]]):
    """A JSON object of the members listed here only: any other is a 400 naming it."""

    # The docstring above is what the schema shows of an input without one of its own.
    # Nested serializers are strict too; every failure is named at once.
    # ``unknown_field_messages`` says why a particular undeclared member is refused (a field
    # the server owns); ``cross_field_errors`` checks rules between members on the raw body,
    # so they are reported beside the members' own errors.

    default_error_messages = {"invalid": "Must be a JSON object."}
    unknown_field_messages: ClassVar[dict[str, str]] = {}
    unknown_field_default = "Unknown field."
    # The rules of ``cross_field_errors`` as the OpenAPI schema states them (``anyOf``,
    # ``oneOf``, ``allOf`` of JSON Schema, merged into the object's schema by apps.api.schema).
    schema_rules: ClassVar[dict[str, Any]] = {}
    # An optional member may be null, meaning the same as leaving it out (the schema says
    # nullable); not a boolean flag, nor a query parameter (which cannot be null).
    null_is_absent = True
    # So that a client inventing many members does not get a document of them all back.
    MAX_UNKNOWN_REPORTED = 50

    def get_fields(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
        # Each serializer instance needs its own field instances (binding sets their name and
        # parent). DRF deep-copies the declared ones, re-running every field's __init__: most
        # of the time of a write's validation. A shallow copy is enough for a field whose
        # state is set at declaration and never changed; fields holding a child field (lists,
        # many=True) are still deep-copied, as the child is bound to its parent.
        fields = {
            name: copy.deepcopy(field) if _holds_child(field) else _fresh_copy(field)
            for name, field in self._declared_fields.items()
        }
        if self.null_is_absent:
            for field in fields.values():
                # Not a flag: a null dry_run must not fall through to the destructive default.
                if isinstance(field, serializers.BooleanField):
                    continue
                if not field.required and not field.allow_null:
                    field.allow_null = True
                    setattr(field, "null_means_absent", True)  # noqa: B010 (not a declared attribute)
        return fields

    def unknown_field_message(self, name: str) -> str:
        return self.unknown_field_messages.get(name, self.unknown_field_default)

    def cross_field_errors(self, data: Mapping[str, Any]) -> dict[str, list[str]]:
        """Rules between members, on the raw object (override); ``{path: [message]}``."""
        return {}

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        if not isinstance(data, Mapping):
            # As DRF does: the object's own error, which the problem names by its path.
            raise serializers.ValidationError(
                {api_settings.NON_FIELD_ERRORS_KEY: [self.error_messages["invalid"]]},
                code="invalid",
            )
        fields = self.fields
        data = {
            name: item
            for name, item in data.items()
            if not (item is None and getattr(fields.get(name), "null_means_absent", False))
        }
        errors: dict[str, Any] = {}
        try:
            value: dict[str, Any] = super().to_internal_value(data)
        except serializers.ValidationError as error:
            # DRF's Serializer raises its members' errors as one mapping.
            errors.update(error.detail if isinstance(error.detail, Mapping) else {})
            value = {}
        for path, messages in self.cross_field_errors(data).items():
            if not _has_error_at(errors, path):  # the member's own error says more
                errors[path] = messages
        unknown = [str(name) for name in data if name not in self.fields]
        for name in unknown[: self.MAX_UNKNOWN_REPORTED]:
            errors[name[:200]] = [self.unknown_field_message(name)]
        if errors:
            raise serializers.ValidationError(errors)
        return value


def _has_error_at(errors: Mapping[str, Any], path: str) -> bool:
    """Whether DRF's nested ``errors`` already name the member at dotted ``path``."""
    node: Any = errors
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return False
        node = node[part]
    return True


class QuerySerializer(StrictSerializer):
    """An operation's query parameters: the same rules as a body (an unknown parameter, a
    malformed value or an empty one is a 400), on the text of a query string."""

    unknown_field_default = ""
    null_is_absent = False

    def unknown_field_message(self, name: str) -> str:
        accepted = ", ".join(self.fields) or "none"
        return f"Unknown query parameter (accepted here: {accepted})."


class PageQuery(QuerySerializer):
    """A listing's ``cursor`` and ``page_size``: every listing of the API takes both
    (:class:`apps.core.pagination.CursorPage`)."""

    cursor = StrictCharField(
        required=False, max_length=1000, help_text="The `next` or `previous` link's cursor."
    )
    page_size = QueryIntegerField(
        required=False,
        min_value=1,
        max_value=PAGE_SIZE_LIMIT,
        help_text=f"Items per page, 1 to {PAGE_SIZE_LIMIT} (default {PAGE_SIZE_DEFAULT}).",
    )


# --- the view ---------------------------------------------------------------------------------


class InputRejected(Invalid):
    """A request's query or body failed its contract: 400 (or 413 for content over its size),
    every failing field named by its path. ``where``: ``query``, ``body``, or ``request`` for
    both at once."""

    def __init__(
        self, errors: dict[str, list[str]], *, where: str, too_large: bool = False
    ) -> None:
        names = list(errors)
        shown = ", ".join(names[:10]) + (", ..." if len(names) > 10 else "")
        if where == "query":
            detail = f"Invalid or unknown query parameters: {shown}. Nothing was done."
        elif where == "request" and not too_large:
            detail = (
                f"Invalid or unknown query parameters and body fields: {shown}. Nothing was done."
            )
        elif too_large:
            detail = f"Content over its size limit: {shown}. Nothing was done."
        else:
            detail = f"The request has invalid or unknown fields: {shown}. Nothing was done."
        super().__init__(detail, status=413 if too_large else 400, errors=errors)
        self.where = where
        self.too_large = too_large


def has_code(detail: Any, code: str) -> bool:
    """Whether any error in DRF's nested ``detail`` carries ``code``."""
    stack = [detail]
    while stack:
        item = stack.pop()
        if isinstance(item, ErrorDetail):
            if item.code == code:
                return True
        elif isinstance(item, Mapping):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


NO_BODY = "This operation takes no body."
# A body an operation does not take is read only this far, to name the members of a small JSON
# object (options a client thought it could give); a longer one is refused unread.
NO_BODY_READ_BYTES = 4096
UNREAD_BODY = (
    "Send the body with a Content-Length: a body sent in chunks (Transfer-Encoding) is not read."
)


class _InputContext(Mapping[str, Any]):
    """The context of the validation this thread is running: what ``self.context`` reads in a
    serializer built once (:func:`_built_once`), set by each :func:`validate_input`."""

    def __getitem__(self, name: str) -> Any:
        return _input_context.get()[name]

    def __iter__(self) -> Any:
        return iter(_input_context.get())

    def __len__(self) -> int:
        return len(_input_context.get())


_input_context: ContextVar[Mapping[str, Any]] = ContextVar("input_context")
_serializers_built = threading.local()


def _built_once(serializer_class: type[serializers.Serializer[Any]]) -> Any:
    """This thread's instance of ``serializer_class``, its fields built on first use.

    Building a serializer's fields (a copy of every declared field, nested serializers' too)
    cost more than validating a write's body with them (docs/performance.md, "Request path").
    DRF validates a mapping without keeping anything of it on the serializer
    (``run_validation`` returns the data or raises), so one instance per thread serves every
    request of that thread; its context is the request's (:class:`_InputContext`).
    ``tests/api/test_contract.py`` holds it to a serializer built for the call.
    """
    built: dict[type[Any], Any] | None = getattr(_serializers_built, "by_class", None)
    if built is None:
        built = _serializers_built.by_class = {}
    serializer = built.get(serializer_class)
    if serializer is None:
        # Any mapping serves as DRF's context (it is only read); the stubs ask for a dict.
        context = cast(dict[str, Any], _InputContext())
        serializer = built[serializer_class] = serializer_class(context=context)
    return serializer


def validate_input(
    serializer_class: type[serializers.Serializer[Any]] | None,
    data: Any,
    *,
    where: str,
    context: dict[str, Any] | None = None,
) -> Any:
    """``data`` checked by ``serializer_class`` (None: nothing may be given); raises
    :class:`InputRejected`. Returns the serializer's validated data."""
    if serializer_class is None:
        if isinstance(data, Mapping) and not data:
            return {}
        if isinstance(data, Mapping):
            message = "Unknown query parameter (none accepted here)."
            if where == "body":
                message = "Unknown field (this operation takes no body)."
            raise InputRejected({str(name)[:200]: [message] for name in data}, where=where)
        raise InputRejected({"body": [NO_BODY]}, where=where)
    token = _input_context.set(context or {})
    try:
        return _built_once(serializer_class).run_validation(data)
    except serializers.ValidationError as error:
        detail = error.detail
        raise InputRejected(
            flatten_errors(detail), where=where, too_large=has_code(detail, TOO_LARGE)
        ) from None
    finally:
        _input_context.reset(token)


def body_length(request: Request) -> int:
    """The length of the body Django reads: its Content-Length (0 without a valid one)."""
    try:
        return max(0, int(request.META.get("CONTENT_LENGTH") or 0))
    except ValueError:
        return 0


def _refuse_unread_body(request: Request) -> None:
    if request.META.get("HTTP_TRANSFER_ENCODING"):
        # Django reads a body by its Content-Length only: one in chunks would read as none.
        raise InputRejected({"body": [UNREAD_BODY]}, where="body")


def refuse_body(request: Request) -> None:
    """Refuse any body but an empty one (or ``{}``, which names nothing), whatever the method
    and content type: a :class:`InputRejected` naming ``body``, or a JSON object's members.

    For an operation that takes no body. One it would ignore (a ``DELETE`` given
    ``{"dry_run": true}``, ``not json`` as text/plain) must not let it go ahead as if the client
    had asked for nothing more."""
    _refuse_unread_body(request)
    if not body_length(request):
        return
    if not request.content_type or body_length(request) > NO_BODY_READ_BYTES:
        raise InputRejected({"body": [NO_BODY]}, where="body")
    try:
        data = request.data
    except (ParseError, UnsupportedMediaType, serializers.ValidationError) as exc:
        raise InputRejected({"body": [NO_BODY]}, where="body") from exc
    validate_input(None, data, where="body")


def request_body(request: Request) -> Any:
    """The request's JSON body for an operation that takes one; ``{}`` when there is none."""
    _refuse_unread_body(request)
    if not body_length(request):
        return {}
    if not request.content_type:
        # DRF would read a body without a Content-Type as no body at all.
        raise UnsupportedMediaType(
            "", detail="The body has no Content-Type; send it as application/json."
        )
    return request.data


def query_values(query: QueryDict) -> tuple[dict[str, str], dict[str, list[str]]]:
    """A query string as ``{name: value}``, and an error for every parameter given twice."""
    values: dict[str, str] = {}
    errors: dict[str, list[str]] = {}
    for name, given in query.lists():
        if len(given) > 1:
            errors[name[:200]] = ["Give this parameter once."]
        values[name] = given[-1]
    return values, errors


class ContractMixin(APIView):
    """An API view whose input is validated by its declared serializers before it runs.

    ``query_input`` / ``body_input`` map an HTTP method to its serializer class; the
    validated input is ``self.params`` and ``self.body``. ``input_context`` adds to the
    serializers' context (the request, the view, the credential's tenant). Checked after the
    credential and its actions (an unauthenticated request still gets its 401 first) and
    before the handler looks anything up, so a refused request changes nothing."""

    query_input: ClassVar[Mapping[str, type[serializers.Serializer[Any]]]] = {}
    body_input: ClassVar[Mapping[str, type[serializers.Serializer[Any]]]] = {}

    params: Any
    body: Any

    def input_context(self, request: Request) -> dict[str, Any]:
        context: dict[str, Any] = {"request": request, "view": self, "now": timezone.now()}
        tenant = getattr(request.auth, "tenant", None)
        if tenant is not None:
            context["tenant"] = tenant
        return context

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        method = (request.method or "").upper()
        if method.lower() not in self.http_method_names or not hasattr(self, method.lower()):
            return  # a 405 follows: nothing to validate for an operation that does not exist
        context = self.input_context(request)
        query_refused: InputRejected | None = None
        try:
            values, repeated = query_values(request.query_params)
            if repeated:
                raise InputRejected(repeated, where="query")
            self.params = validate_input(
                serializer_for(self, method, "query"), values, where="query", context=context
            )
        except InputRejected as refused:
            query_refused = refused  # reported with the body's failures, all at once
        body_class = serializer_for(self, method, "body")
        try:
            if body_class is None:
                refuse_body(request)
                self.body = {}
            else:
                data = request_body(request)
                self.body = validate_input(body_class, data, where="body", context=context)
        except InputRejected as refused:
            if query_refused is None:
                raise
            errors = {
                name: list(messages) for name, messages in (query_refused.errors or {}).items()
            }
            for name, messages in (refused.errors or {}).items():
                errors.setdefault(name, []).extend(messages)
            raise InputRejected(errors, where="request", too_large=refused.too_large) from refused
        if query_refused is not None:
            raise query_refused


class ContractView(ContractMixin, APIView):
    """An :class:`APIView` with an input contract."""


def serializer_for(view: Any, method: str, kind: str) -> type[serializers.Serializer[Any]] | None:
    """The declared query (``kind="query"``) or body serializer of ``view`` for ``method``
    (``HEAD`` is ``GET`` without the answer's body: its query is ``GET``'s, and no body)."""
    method = method.upper()
    if method == "HEAD" and kind == "body":
        return None
    method = "GET" if method == "HEAD" else method
    declared: Mapping[str, Any] = getattr(view, f"{kind}_input", {}) or {}
    found: type[serializers.Serializer[Any]] | None = declared.get(method)
    return found
