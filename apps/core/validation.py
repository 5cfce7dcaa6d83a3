"""Validation primitives every layer shares: what PostgreSQL can store as text or jsonb,
JSON compared by meaning, and the ISO 8601 durations the API takes and echoes."""

from __future__ import annotations

import json
import math
import re
from datetime import timedelta
from typing import Any

# Deeper JSON than this is refused at the door: every later step (validation, hashing,
# storage, rendering) recurses through it, and Python's stack is finite.
MAX_JSON_DEPTH = 100
TOO_DEEP = f"JSON nested deeper than {MAX_JSON_DEPTH} levels."


UNSTORABLE_NUL = "Must not contain the NUL character (U+0000)."
UNSTORABLE_SURROGATE = "Must be valid Unicode (no unpaired surrogate code points)."
UNSTORABLE_NUMBER = "Must be a finite number (this one overflows a double)."
UNDERFLOWING_NUMBER = (
    "Must be a number a double holds (this one is too small: it would be stored as 0)."
)
REPEATED_MEMBER = "Named more than once in the same object; give each member once."


def unstorable_text(text: str) -> str | None:
    """Why no text column can hold ``text`` (NUL, an unpaired surrogate), or None."""
    if "\x00" in text:
        return UNSTORABLE_NUL
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return UNSTORABLE_SURROGATE
    return None


class _RepeatingObject(dict[str, Any]):
    """A JSON object as parsed that named some members more than once: the names, beside the
    values (the last of each, as ``json`` keeps), for :func:`json_body_problems` to refuse."""

    repeated: list[str]


def json_object_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` of every JSON read of a request: an object, remembering any member
    it names twice. ``json`` would silently keep the last value, so ``{"dry_run": true,
    "dry_run": false}`` would read as one of the two; which one is nobody's intent."""
    members = dict(pairs)
    if len(members) == len(pairs):
        return members
    seen: set[str] = set()
    repeated: list[str] = []
    for name, _ in pairs:
        if name in seen and name not in repeated:
            repeated.append(name)
        seen.add(name)
    marked = _RepeatingObject(members)
    marked.repeated = repeated
    return marked


class _UnderflowedFloat(float):
    """A nonzero number literal that a double holds only as 0 (``1e-400``), for
    :func:`json_body_problems` to refuse: stored, it would silently be zero, as an overflow
    would be infinity (which is refused too). A subnormal (``5e-324``) is a double like any
    other, rounded as any literal with more digits than a double keeps, and is accepted."""


_NONZERO_DIGIT = re.compile(r"[1-9]")


def _json_float(literal: str) -> float:
    """``parse_float`` of every JSON read of a request."""
    value = float(literal)
    if value == 0.0:
        mantissa = literal.partition("e")[0].partition("E")[0]
        if _NONZERO_DIGIT.search(mantissa):
            return _UnderflowedFloat(value)
    return value


def json_loads(text: str | bytes, **kwargs: Any) -> Any:
    """``json.loads`` for what a request sends: a member named twice, and a number that
    underflows a double, are kept for :func:`json_body_problems` to name."""
    kwargs.setdefault("parse_float", _json_float)
    return json.loads(text, object_pairs_hook=json_object_pairs, **kwargs)


def _child_path(parent: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{parent}[{key}]"
    return f"{parent}.{key}" if parent else key


def _plain_scalar(value: Any) -> bool:
    """A value :func:`json_body_problems` has nothing to say about: a finite double as parsed,
    an integer, a boolean, null, or a string a text column holds."""
    kind = type(value)
    if kind is float:  # exactly: an _UnderflowedFloat is a float subclass
        return math.isfinite(value)
    if kind is int or kind is bool or value is None:
        return True
    return kind is str and unstorable_text(value) is None


def json_body_problems(value: Any, limit: int = MAX_JSON_DEPTH) -> dict[str, list[str]] | None:
    """What no field of any request may hold, by field path; ``None`` when there is nothing.

    A body nested deeper than ``limit`` is one problem (``body``). Otherwise every string (key
    or value) holding NUL or an unpaired surrogate, and every number that overflowed to
    infinity, is named by its path: PostgreSQL can store none of them in text or jsonb, so
    each would otherwise fail at the database, whatever the endpoint. So is every nonzero
    number that underflowed to 0, which would be stored as zero, and every member an object
    named twice, of which only one value would be kept (both read by :func:`json_loads`).
    Iterative: no recursion of our own through a body the client shaped.
    """
    problems: dict[str, list[str]] = {}
    stack: list[tuple[Any, str, int]] = [(value, "", 1)]
    while stack:
        item, path, depth = stack.pop()
        if isinstance(item, str):
            message = unstorable_text(item)
        elif isinstance(item, float) and not math.isfinite(item):
            message = UNSTORABLE_NUMBER
        elif isinstance(item, _UnderflowedFloat):
            message = UNDERFLOWING_NUMBER
        else:
            message = None
        if message:
            problems.setdefault(path or "body", []).append(message)
            continue
        if isinstance(item, _RepeatingObject):
            for name in item.repeated:
                problems.setdefault(_child_path(path, name), []).append(REPEATED_MEMBER)
        if isinstance(item, dict):
            children: list[tuple[str | int, Any]] = list(item.items())
        elif isinstance(item, list):
            children = list(enumerate(item))
        else:
            continue
        if depth > limit:
            return {"body": [TOO_DEEP]}
        for key, child in children:
            if isinstance(key, str):
                key_problem = unstorable_text(key)
                if key_problem:
                    problems.setdefault(_child_path(path, key), []).append(key_problem)
                    continue
            if _plain_scalar(child):
                # Nothing to report, nothing below: not stacked, and no path built (a
                # vector's 384 numbers were most of a search's validation).
                continue
            stack.append((child, _child_path(path, key), depth + 1))
    return problems or None


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


DURATION_RE = re.compile(
    r"^P(?:(?P<weeks>\d{1,6})W"
    r"|(?:(?P<days>\d{1,6})D)?"
    r"(?:T(?=\d)(?:(?P<hours>\d{1,9})H)?(?:(?P<minutes>\d{1,9})M)?"
    r"(?:(?P<seconds>\d{1,9})(?:\.(?P<microseconds>\d{1,6}))?S)?)?)$"
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
    if "microseconds" in parts:
        parts["microseconds"] = int(match["microseconds"].ljust(6, "0"))
    try:
        return timedelta(**parts)
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
        return f"-{format_duration(-value)}"
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
