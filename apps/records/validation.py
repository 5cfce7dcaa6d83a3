"""The write boundary: every rule a memory write must pass before anything is stored.

Pure functions over the decoded JSON body, shared by the API and the console. A failure
names every failing field by its path (``source.kind``, ``retention.consent_ref``) so the
caller can fix them all at once.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from django.utils import timezone
from django.utils.dateparse import parse_datetime, parse_duration

from .models import RedactionState, RetentionBasis, Sensitivity, SourceKind
from .redaction import (
    MISSING,
    REDACTION_MARKER,
    part_at,
    redaction_apply,
    redaction_path_name,
)

MAX_VALUE_BYTES = 64 * 1024
MAX_CONTENT_CHARS = 64 * 1024
CLOCK_SKEW = timedelta(minutes=1)

KEY_RE = re.compile(r"^[a-z0-9_][a-z0-9_-]*(\.[a-z0-9_][a-z0-9_-]*)*$")
SUBJECT_RE = re.compile(r"^[a-z][a-z0-9_-]*:[A-Za-z0-9._@+/=:-]+$")
OWNER_RE = re.compile(r"^(user|service|team|tenant|agent):[A-Za-z0-9._@+/=:-]+$")
SCOPE_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")
WEEKS_DURATION_RE = re.compile(r"^P(\d{1,5})W$")
# Valid ISO 8601 with years or months (P1Y, P6M, P1Y2M10DT2H): no fixed length in seconds.
CALENDAR_DURATION_RE = re.compile(r"^P(?=[^T]*[YM])(\d+Y)?(\d+M)?(\d+W)?(\d+D)?(T[\d.,HMS]+)?$")

TOP_LEVEL_FIELDS = frozenset(
    {
        "key",
        "subject",
        "value",
        "content",
        "source",
        "observed_at",
        "owner",
        "reason",
        "scope",
        "sensitivity",
        "retention",
        "redaction",
    }
)
SERVER_FIELDS = {
    "writer": "the writer is stamped by the server from your credential",
    "trust": "every write is provisional; promotion is a separate, reviewed step",
    "status": "status is set by the server",
    "version": "versions are assigned by the server",
    "id": "ids are assigned by the server",
    "written_at": "written_at is set by the server",
    "expires_at": "expires_at is computed from retention.ttl and the tenant's rules",
    "supersedes": "supersedes is set by the server",
}
SOURCE_FIELDS = frozenset({"kind", "ref", "turn_id", "tool_call_id", "run_id"})
SCOPE_FIELDS = frozenset({"domain", "task_type", "conditions"})
RETENTION_FIELDS = frozenset({"basis", "ttl", "consent_ref"})
REDACTION_FIELDS = frozenset({"state", "fields"})
# Every field path a rejection may name that the schema itself defines. Any other path comes
# from a member name the client made up, which is submitted content (it may be an email
# address): the audit counts such paths instead of keeping them.
KNOWN_PATHS = frozenset(
    {"body"}
    | TOP_LEVEL_FIELDS
    | set(SERVER_FIELDS)
    | {f"source.{name}" for name in SOURCE_FIELDS}
    | {f"scope.{name}" for name in SCOPE_FIELDS}
    | {f"retention.{name}" for name in RETENTION_FIELDS}
    | {f"redaction.{name}" for name in REDACTION_FIELDS}
)


@dataclass
class RecordInput:
    """A validated memory write."""

    key: str
    subject: str
    value: Any
    content: str
    source_kind: str
    source_ref: str
    source_turn_id: str
    source_tool_call_id: str
    source_run_id: str
    observed_at: datetime
    owner: str
    reason: str
    scope_domain: str
    scope_task_type: str
    scope_conditions: dict[str, Any]
    sensitivity: str
    retention_basis: str
    ttl: timedelta | None
    consent_ref: str
    redaction_state: str
    redaction_fields: list[str] = field(default_factory=list)


class WriteRejected(Exception):
    """The body failed validation; ``errors`` maps field paths to messages."""

    def __init__(self, errors: dict[str, list[str]], *, too_large: bool = False) -> None:
        super().__init__("invalid memory write")
        self.errors = errors
        self.too_large = too_large


def audit_field_names(errors: dict[str, list[str]]) -> dict[str, Any]:
    """What the audit keeps of a rejection: the schema's field paths, and only a count of the
    member names the client invented."""
    known = sorted(path for path in errors if path in KNOWN_PATHS)
    unknown = len(errors) - len(known)
    return {"fields": known, "unknown_fields": unknown} if unknown else {"fields": known}


def text_problem(value: str) -> str | None:
    """Why PostgreSQL could not store ``value`` as text, or None.

    JSON may carry ``\\u0000`` and unpaired surrogates (``\\ud800``); neither can be stored
    in a text or jsonb column, and unchecked they fail deep in the database driver.
    """
    if "\x00" in value:
        return "Must not contain the NUL character (U+0000)."
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "Must be valid Unicode (no unpaired surrogate code points)."
    return None


def json_problem(value: Any) -> str | None:
    """Why ``value`` could not be stored as jsonb, or None: a string :func:`text_problem`
    refuses (values and member names) or a number that overflowed to infinity (``1e400``)."""
    stack: list[Any] = [value]
    while stack:  # iterative: nesting is bounded by the parser, but recursion is not needed
        item = stack.pop()
        if isinstance(item, str):
            problem = text_problem(item)
            if problem:
                return problem
        elif isinstance(item, float):
            if not math.isfinite(item):
                return "Numbers must be finite."
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def json_equal(left: Any, right: Any) -> bool:
    """Whether two JSON values mean the same: numbers by value (``1`` is ``1.0``), objects
    by their members whatever the order, arrays item by item; ``true`` is not ``1``."""
    pairs: list[tuple[Any, Any]] = [(left, right)]
    while pairs:  # iterative, as json_problem: a value may nest as deep as the parser allows
        a, b = pairs.pop()
        if isinstance(a, bool) or isinstance(b, bool):
            if not (isinstance(a, bool) and isinstance(b, bool) and a is b):
                return False
        elif isinstance(a, int | float) and isinstance(b, int | float):
            # Exact between int and float: 10**20 == 1e20, but 2**53 + 1 != 2.0**53.
            if a != b:
                return False
        elif isinstance(a, dict) and isinstance(b, dict):
            if a.keys() != b.keys():
                return False
            pairs.extend((a[name], b[name]) for name in a)
        elif isinstance(a, list) and isinstance(b, list):
            if len(a) != len(b):
                return False
            pairs.extend(zip(a, b, strict=True))
        elif type(a) is not type(b) or a != b:
            return False
    return True


def render_content(key: str, value: Any) -> str:
    """The default text of a record: ``key: value`` (what full-text search indexes)."""
    if isinstance(value, str):
        return f"{key}: {value}"
    return f"{key}: {canonical_json(value)}"


def format_duration(value: timedelta | None) -> str | None:
    """ISO 8601 duration (``P30D``, ``PT1H30M``, ``P1DT2H``)."""
    if value is None:
        return None
    total = int(value.total_seconds())
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    out = "P" + (f"{days}D" if days else "")
    time = (f"{hours}H" if hours else "") + (f"{minutes}M" if minutes else "")
    time += f"{seconds}S" if seconds else ""
    if time:
        out += "T" + time
    return out if out != "P" else "PT0S"


class _Collector:
    def __init__(self) -> None:
        self.errors: dict[str, list[str]] = {}
        self.too_large = False

    def add(self, path: str, message: str) -> None:
        self.errors.setdefault(path, []).append(message)

    def text(
        self, data: dict[str, Any], name: str, path: str, *, required: bool, max_length: int
    ) -> str:
        raw = data.get(name)
        if raw is None:
            if required:
                self.add(path, "This field is required.")
            return ""
        if not isinstance(raw, str):
            self.add(path, "Must be a string.")
            return ""
        problem = text_problem(raw)
        if problem:
            self.add(path, problem)
            return ""
        value = raw.strip()
        if required and not value:
            self.add(path, "Must not be empty.")
        if len(value) > max_length:
            self.add(path, f"At most {max_length} characters.")
        return value

    def choice(
        self, data: dict[str, Any], name: str, path: str, choices: list[str], default: str = ""
    ) -> str:
        raw = data.get(name)
        if raw is None:
            if not default:
                self.add(path, "This field is required.")
            return default
        if raw not in choices:
            self.add(path, f"Must be one of: {', '.join(choices)}.")
            return default
        return str(raw)

    def obj(self, data: dict[str, Any], name: str, *, required: bool) -> dict[str, Any] | None:
        raw = data.get(name)
        if raw is None:
            if required:
                self.add(name, "This field is required.")
            return None
        if not isinstance(raw, dict):
            self.add(name, "Must be an object.")
            return None
        return raw

    def unknown(self, data: dict[str, Any], allowed: frozenset[str], prefix: str) -> None:
        for extra in sorted(set(data) - allowed):
            path = f"{prefix}.{extra}" if prefix else extra
            self.add(
                path, SERVER_FIELDS.get(extra, "Unknown field.") if not prefix else "Unknown field."
            )


def validate_write(body: Any, *, now: datetime | None = None) -> RecordInput:
    """Check a write body against every rule of the contract; raise :class:`WriteRejected`."""
    now = now or timezone.now()
    c = _Collector()
    if not isinstance(body, dict):
        raise WriteRejected({"body": ["Must be a JSON object."]})
    c.unknown(body, TOP_LEVEL_FIELDS, "")

    key = c.text(body, "key", "key", required=True, max_length=200)
    if key and not KEY_RE.match(key):
        c.add(
            "key", "A dotted name of lowercase letters, digits, _ and -, e.g. shipping.preference."
        )
    subject = c.text(body, "subject", "subject", required=True, max_length=200)
    if subject and not SUBJECT_RE.match(subject):
        c.add("subject", "Use kind:identifier, e.g. user:8812 (no spaces).")

    value: Any = None
    if "value" not in body:
        c.add("value", "This field is required.")
    elif body["value"] is None:
        c.add("value", "Must not be null; delete the record to forget a value.")
    elif problem := json_problem(body["value"]):
        c.add("value", problem)
    else:
        value = body["value"]
        size = len(canonical_json(value).encode())
        if size > MAX_VALUE_BYTES:
            c.add("value", f"At most {MAX_VALUE_BYTES} bytes as JSON (got {size}).")
            c.too_large = True

    content = c.text(body, "content", "content", required=False, max_length=MAX_CONTENT_CHARS)
    if body.get("content") is not None and not content and "content" not in c.errors:
        c.add("content", "Must not be empty when given.")

    source_kind = source_ref = turn_id = tool_call_id = run_id = ""
    source = c.obj(body, "source", required=True)
    if source is not None:
        c.unknown(source, SOURCE_FIELDS, "source")
        source_kind = c.choice(source, "kind", "source.kind", SourceKind.values)
        source_ref = c.text(source, "ref", "source.ref", required=True, max_length=300)
        turn_id = c.text(source, "turn_id", "source.turn_id", required=False, max_length=200)
        tool_call_id = c.text(
            source, "tool_call_id", "source.tool_call_id", required=False, max_length=200
        )
        run_id = c.text(source, "run_id", "source.run_id", required=False, max_length=200)

    observed_at = now
    raw_observed = body.get("observed_at")
    if raw_observed is None:
        c.add("observed_at", "This field is required.")
    elif not isinstance(raw_observed, str):
        c.add("observed_at", "Must be an RFC 3339 timestamp with a zone.")
    else:
        parsed = _parse_timestamp(raw_observed)
        if parsed is None:
            c.add(
                "observed_at",
                "Must be an RFC 3339 timestamp with a zone, e.g. 2025-01-14T09:12:00Z.",
            )
        elif parsed > now + CLOCK_SKEW:
            c.add("observed_at", "Must not be in the future.")
        else:
            observed_at = parsed

    owner = c.text(body, "owner", "owner", required=True, max_length=200)
    if owner and not OWNER_RE.match(owner):
        c.add(
            "owner",
            "An accountable principal: user:<id>, service:<name>, team:<name> or tenant:<slug>.",
        )
    reason = c.text(body, "reason", "reason", required=True, max_length=2000)

    domain = task_type = ""
    conditions: dict[str, Any] = {}
    scope = c.obj(body, "scope", required=True)
    if scope is not None:
        c.unknown(scope, SCOPE_FIELDS, "scope")
        domain = c.text(scope, "domain", "scope.domain", required=True, max_length=100)
        if domain and not SCOPE_NAME_RE.match(domain):
            c.add("scope.domain", "Lowercase letters, digits, _, . and -.")
        task_type = c.text(scope, "task_type", "scope.task_type", required=False, max_length=100)
        if task_type and not SCOPE_NAME_RE.match(task_type):
            c.add("scope.task_type", "Lowercase letters, digits, _, . and -.")
        raw_conditions = scope.get("conditions")
        if raw_conditions is not None:
            if not isinstance(raw_conditions, dict):
                c.add("scope.conditions", "Must be an object.")
            elif problem := json_problem(raw_conditions):
                c.add("scope.conditions", problem)
            elif len(canonical_json(raw_conditions)) > 4096:
                c.add("scope.conditions", "At most 4096 bytes as JSON.")
            else:
                conditions = raw_conditions

    sensitivity = c.choice(body, "sensitivity", "sensitivity", Sensitivity.values)

    basis = consent_ref = ""
    ttl: timedelta | None = None
    retention = c.obj(body, "retention", required=True)
    if retention is not None:
        c.unknown(retention, RETENTION_FIELDS, "retention")
        basis = c.choice(retention, "basis", "retention.basis", RetentionBasis.values)
        raw_ttl = retention.get("ttl")
        if raw_ttl is not None:
            ttl = _parse_ttl(raw_ttl)
            if ttl is None and isinstance(raw_ttl, str) and CALENDAR_DURATION_RE.match(raw_ttl):
                c.add(
                    "retention.ttl",
                    "Years and months have no fixed length; give the lifetime in days or "
                    "weeks, e.g. P365D.",
                )
            elif ttl is None:
                c.add("retention.ttl", "An ISO 8601 duration greater than zero, e.g. P30D.")
        consent_ref = c.text(
            retention, "consent_ref", "retention.consent_ref", required=False, max_length=200
        )
        if basis == RetentionBasis.CONSENT and not consent_ref:
            c.add("retention.consent_ref", "Required when retention.basis is consent.")
        if basis == RetentionBasis.SESSION and source is not None and not run_id:
            c.add(
                "source.run_id", "Required when retention.basis is session (the run it ends with)."
            )

    redaction_state = RedactionState.NONE.value
    redaction_fields: list[str] = []
    redaction = c.obj(body, "redaction", required=False)
    if redaction is not None:
        c.unknown(redaction, REDACTION_FIELDS, "redaction")
        redaction_state = c.choice(
            redaction, "state", "redaction.state", RedactionState.values, default="none"
        )
        raw_fields = redaction.get("fields", [])
        if not isinstance(raw_fields, list) or not all(
            isinstance(f, str) and 0 < len(f) <= 200 and not text_problem(f) for f in raw_fields
        ):
            c.add("redaction.fields", "Must be a list of field names.")
        else:
            redaction_fields = list(dict.fromkeys(raw_fields))

    if c.errors:
        raise WriteRejected(c.errors, too_large=c.too_large)
    value, content, redaction_state, redaction_fields = _redaction_at_write(
        key=key,
        value=value,
        content=content,
        state=redaction_state,
        fields=redaction_fields,
    )
    return RecordInput(
        key=key,
        subject=subject,
        value=value,
        content=content,
        source_kind=source_kind,
        source_ref=source_ref,
        source_turn_id=turn_id,
        source_tool_call_id=tool_call_id,
        source_run_id=run_id,
        observed_at=observed_at,
        owner=owner,
        reason=reason,
        scope_domain=domain,
        scope_task_type=task_type,
        scope_conditions=conditions,
        sensitivity=sensitivity,
        retention_basis=basis,
        ttl=ttl,
        consent_ref=consent_ref,
        redaction_state=redaction_state,
        redaction_fields=redaction_fields,
    )


def _redaction_at_write(
    *, key: str, value: Any, content: str, state: str, fields: list[str]
) -> tuple[Any, str, str, list[str]]:
    """The value and text to store, with the redaction the write declares.

    ``required``: the named parts are rewritten to the marker here, before anything is
    stored, embedded or queued, by the rule ``record_redact`` uses; the record says
    ``applied``. ``applied``: every named part must hold the marker already. Either way a
    path must name a part of the value. Raises :class:`WriteRejected` naming the field.
    """
    if state == RedactionState.NONE:
        if fields:
            # Most likely a forgotten state: storing the named parts in plaintext is not the
            # safe reading of it.
            raise WriteRejected(
                {
                    "redaction.fields": [
                        "Fields are redacted only with redaction.state required (redacted "
                        "here) or applied (already redacted by you)."
                    ]
                }
            )
        return value, content or render_content(key, value), state, fields
    if not fields:
        raise WriteRejected(
            {"redaction.fields": [f"Name the parts of the value that are {state}."]}
        )
    problems: list[str] = []
    parts: dict[str, Any] = {}
    for path in fields:
        part = part_at(value, path)
        if part is MISSING:
            problems.append(f"{path}: no such part in the value.")
        elif state == RedactionState.APPLIED and part != REDACTION_MARKER:
            problems.append(
                f"{path}: still holds its content, not the redaction marker "
                f"{REDACTION_MARKER!r}; send redaction.state required to have it redacted "
                f"before it is stored."
            )
        else:
            parts[path] = part
    if problems:
        raise WriteRejected({"redaction.fields": problems})
    names = list(dict.fromkeys(redaction_path_name(path) for path in fields))
    if state == RedactionState.APPLIED:
        return value, content or render_content(key, value), state, names
    redacted_value, redacted_content = redaction_apply(value, content, parts)
    # The default text is rendered from the redacted value, so the parts never reach it.
    return (
        redacted_value,
        redacted_content or render_content(key, redacted_value),
        RedactionState.APPLIED.value,
        names,
    )


def _parse_timestamp(raw: str) -> datetime | None:
    try:
        parsed = parse_datetime(raw.strip())
    except ValueError:
        return None
    if parsed is None or parsed.tzinfo is None:
        return None
    try:
        # 0001-01-01T00:00:00+05:00 is a valid timestamp that falls before year 1 in UTC:
        # neither Python nor the serializer can represent it.
        return parsed.astimezone(UTC)
    except OverflowError:
        return None


def _parse_ttl(raw: Any) -> timedelta | None:
    if not isinstance(raw, str) or not raw.startswith("P"):
        return None
    try:
        weeks = WEEKS_DURATION_RE.match(raw)
        # Django's parser knows days and times but not the ISO 8601 week form (P2W).
        parsed = timedelta(weeks=int(weeks[1])) if weeks else parse_duration(raw)
    except (ValueError, OverflowError):
        return None
    if parsed is None or parsed <= timedelta(0) or parsed > timedelta(days=36500):
        return None
    return parsed
