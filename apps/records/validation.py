"""The domain rules of a memory write that are not the shape of its fields: the syntax of
keys, subjects, owners and scope names, ISO 8601 durations, JSON equality and rendering, and
redaction at write. The fields themselves are validated by the write's serializer
(``apps.records.serializers.RecordWriteInput``), which calls these.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from apps.core.errors import Invalid
from apps.core.validation import (
    CALENDAR_DURATION_RE,
    LONGEST_DURATION,
    canonical_json,
    json_body_problems,
    parse_duration,
)

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
# The identifier after ``kind:``: letters and digits of any script, marks and ``._@+/=:-``;
# no space, control character, quote, bracket or separator. Written as a negated class so
# the schema's pattern (ECMA-262) means what Python's does.
IDENTIFIER = r"[^\s\x00-\x1f\x7f-\x9f\"'`<>()\[\]{}\\,;|!?*#%&^~$]+"
SUBJECT_RE = re.compile(rf"^[a-z][a-z0-9_-]*:{IDENTIFIER}$")
OWNER_RE = re.compile(rf"^(user|service|team|tenant|agent):{IDENTIFIER}$")
SCOPE_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")
# A consent reference is one identifier, as the subject's part after ``kind:`` (any script;
# no space, control character, quote, bracket or separator), matched exactly as written.
CONSENT_REF_RE = re.compile(rf"^{IDENTIFIER}$")


def identifier_normalised(value: str) -> str:
    """One spelling of a subject or an owner: Unicode NFC, case-folded (``user:Alice`` and
    ``user:alice`` are one subject for facts, search and erasure; ``user:علی`` composed one
    way or another is one subject). Applied where identifiers enter (every API field and
    query parameter that names one) and to the rows stored before (migration records 0011)."""
    return unicodedata.normalize("NFC", unicodedata.normalize("NFC", value).casefold())


KEY_MESSAGE = "A dotted name of lowercase letters, digits, _ and -, e.g. shipping.preference."
SUBJECT_MESSAGE = "Use kind:identifier, e.g. user:8812 (no spaces)."
OWNER_MESSAGE = (
    "An accountable principal: user:<id>, service:<name>, team:<name>, tenant:<slug> or agent:<id>."
)
SCOPE_NAME_MESSAGE = "Lowercase letters, digits, _, . and -."
CONSENT_REF_MESSAGE = (
    "One identifier, e.g. consent:2025-17: no space, control character, quote, bracket or "
    "separator."
)


def consent_ref_problem(consent_ref: str) -> str | None:
    """Why ``consent_ref`` cannot be a consent reference, or None: the rule of the write path
    (``retention.consent_ref``), of a revocation's path and of the service revoking one."""
    if not consent_ref or len(consent_ref) > 200:
        return "1 to 200 characters."
    if not CONSENT_REF_RE.match(consent_ref):
        return CONSENT_REF_MESSAGE
    return None


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


WRITE_REJECTED = "The memory write was rejected; nothing was stored."
WRITE_TOO_LARGE = (
    "The memory write is over its size (value: 64 KiB as JSON; content: 65,536 characters); "
    "nothing was stored."
)


class WriteRejected(Invalid):
    """The body failed validation; ``errors`` maps field paths to messages. ``status`` 422:
    the body is valid by itself but names what the tenant does not have (no open run of that
    id, a revoked consent) or an observation whose lifetime has already ended; 413 with
    ``too_large``; else 400."""

    def __init__(
        self, errors: dict[str, list[str]], *, too_large: bool = False, status: int = 400
    ) -> None:
        super().__init__(
            WRITE_TOO_LARGE if too_large else WRITE_REJECTED,
            status=413 if too_large else status,
            errors=errors,
        )
        self.too_large = too_large


def json_problem(value: Any) -> str | None:
    """Why ``value`` could not be stored as jsonb, or None (a NUL, an unpaired surrogate, a
    number that overflowed to infinity): the services' guard for values that reach them from
    the console, where no API contract has looked at them."""
    problems = json_body_problems(value)
    if not problems:
        return None
    return next(iter(problems.values()))[0]


def render_content(key: str, value: Any) -> str:
    """The default text of a record: ``key: value`` (what full-text search indexes)."""
    if isinstance(value, str):
        return f"{key}: {value}"
    return f"{key}: {canonical_json(value)}"


# A run id as POST /api/v1/runs returns it (the hyphenated form; either case).
RUN_ID_RE = re.compile(
    r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
)


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
