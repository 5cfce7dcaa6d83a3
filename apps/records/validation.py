"""The domain rules of a memory write that are not the shape of its fields: the syntax of
keys, subjects, owners and scope names, ISO 8601 durations, JSON equality and rendering, and
redaction at write. The fields themselves are validated by the write's serializer
(``apps.records.serializers.RecordWriteInput``), which calls these.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from .models import RedactionState
from .redaction import (
    MISSING,
    REDACTION_MARKER,
    part_at,
    redaction_apply,
    redaction_path_name,
)

MAX_VALUE_BYTES = 64 * 1024
MAX_CONTENT_CHARS = 64 * 1024
CONDITIONS_BYTES = 4096

KEY_RE = re.compile(r"^[a-z0-9_][a-z0-9_-]*(\.[a-z0-9_][a-z0-9_-]*)*$")
SUBJECT_RE = re.compile(r"^[a-z][a-z0-9_-]*:[A-Za-z0-9._@+/=:-]+$")
OWNER_RE = re.compile(r"^(user|service|team|tenant|agent):[A-Za-z0-9._@+/=:-]+$")
SCOPE_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")

KEY_MESSAGE = "A dotted name of lowercase letters, digits, _ and -, e.g. shipping.preference."
SUBJECT_MESSAGE = "Use kind:identifier, e.g. user:8812 (no spaces)."
OWNER_MESSAGE = (
    "An accountable principal: user:<id>, service:<name>, team:<name>, tenant:<slug> or agent:<id>."
)
SCOPE_NAME_MESSAGE = "Lowercase letters, digits, _, . and -."

# Members of a write body that the server sets: refused with the reason.
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
    """The body failed validation; ``errors`` maps field paths to messages. ``status`` 422:
    the body is valid by itself but names what the tenant does not have (no open run of that
    id, a revoked consent); 413 with ``too_large``; else 400."""

    def __init__(
        self, errors: dict[str, list[str]], *, too_large: bool = False, status: int = 400
    ) -> None:
        super().__init__("invalid memory write")
        self.errors = errors
        self.too_large = too_large
        self.status = 413 if too_large else status


def json_problem(value: Any) -> str | None:
    """Why ``value`` could not be stored as jsonb, or None (a NUL, an unpaired surrogate, a
    number that overflowed to infinity): the services' guard for values that reach them from
    the console, where no API contract has looked at them."""
    from apps.api.problems import json_body_problems

    problems = json_body_problems(value)
    if not problems:
        return None
    return next(iter(problems.values()))[0]


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def json_equal(left: Any, right: Any) -> bool:
    """Whether two JSON values mean the same: numbers by value (``1`` is ``1.0``), objects
    by their members whatever the order, arrays item by item; ``true`` is not ``1``."""
    pairs: list[tuple[Any, Any]] = [(left, right)]
    while pairs:  # iterative: a value may nest as deep as the parser allows
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


# A run id as POST /api/v1/runs returns it (the hyphenated form; either case).
RUN_ID_RE = re.compile(
    r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
)

DURATION_RE = re.compile(
    r"^P(?:(?P<weeks>\d{1,6})W"
    r"|(?:(?P<days>\d{1,6})D)?"
    r"(?:T(?=\d)(?:(?P<hours>\d{1,9})H)?(?:(?P<minutes>\d{1,9})M)?"
    r"(?:(?P<seconds>\d{1,9})(?:\.(?P<fraction>\d{1,6}))?S)?)?)$"
)
# ISO 8601 with years or months (P1Y, P6M, P1Y2M10DT2H): no fixed length in seconds.
CALENDAR_DURATION_RE = re.compile(r"^P(?=[^T]*[YM])(\d+Y)?(\d+M)?(\d+W)?(\d+D)?(T[\d.,HMS]+)?$")
LONGEST_DURATION = timedelta(days=36500)


def parse_duration(raw: str) -> timedelta | None:
    """An ISO 8601 duration as this API takes it, or None.

    Weeks alone (``P2W``), or days and a time (``P1DT2H30M``, ``PT0.5S``): every part is
    whole but the seconds, which keep up to 6 decimals (microseconds, what is stored). No
    sign, no years or months (no fixed length), no ``T`` without a time after it
    (``P30DT``), no empty ``P``. :func:`format_duration` is its exact inverse:
    ``parse_duration(format_duration(d)) == d`` for every duration this returns."""
    match = DURATION_RE.match(raw)
    if match is None or raw in {"P", "PT"} or raw.endswith("T"):
        return None
    parts = {name: int(value) for name, value in match.groupdict().items() if value}
    if "fraction" in parts:
        parts["fraction"] = int(match["fraction"].ljust(6, "0"))
    try:
        return timedelta(
            weeks=parts.get("weeks", 0),
            days=parts.get("days", 0),
            hours=parts.get("hours", 0),
            minutes=parts.get("minutes", 0),
            seconds=parts.get("seconds", 0),
            microseconds=parts.get("fraction", 0),
        )
    except OverflowError:
        return None


def format_duration(value: timedelta | None) -> str | None:
    """ISO 8601 duration in canonical form (``P30D``, ``PT1H30M``, ``P1DT2H``, ``PT0.5S``),
    down to the microsecond: what :func:`parse_duration` reads back as ``value``."""
    if value is None:
        return None
    days, microseconds = value.days, value.seconds * 1_000_000 + value.microseconds
    if days < 0:
        # Not a lifetime anyone sets; written with a sign rather than wrongly.
        positive = format_duration(-value)
        return f"-{positive}"
    seconds, micro = divmod(microseconds, 1_000_000)
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    out = "P" + (f"{days}D" if days else "")
    time = (f"{hours}H" if hours else "") + (f"{minutes}M" if minutes else "")
    if micro:
        time += f"{seconds}.{micro:06d}".rstrip("0") + "S"
    elif seconds:
        time += f"{seconds}S"
    if time:
        out += "T" + time
    return out if out != "P" else "PT0S"


def ttl_parse(raw: str) -> tuple[timedelta | None, str]:
    """A retention ttl: the duration, or None with the reason it is refused."""
    if CALENDAR_DURATION_RE.match(raw):
        return None, (
            "Years and months have no fixed length; give the lifetime in days or weeks, e.g. P365D."
        )
    parsed = parse_duration(raw)
    if parsed is None:
        return None, (
            "An ISO 8601 duration, e.g. P30D, P2W, PT12H or PT0.5S (no sign, no empty T)."
        )
    if parsed <= timedelta(0):
        return None, "Must be longer than zero."
    if parsed > LONGEST_DURATION:
        return None, "At most 36500 days (P36500D)."
    return parsed, ""


def redaction_at_write(
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
