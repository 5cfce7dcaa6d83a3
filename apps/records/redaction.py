"""The one definition of redaction: which part of a value a path names, the marker that part is
rewritten to, and the renderings of it that must leave the record's text.

Used by the write boundary (``redaction.state`` ``required`` is applied, ``applied`` is
verified) and by ``record_redact`` on a stored record, so a part redacted either way looks the
same.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from apps.core.validation import canonical_json

REDACTION_MARKER = "[REDACTED]"
WHOLE_VALUE = "value"


class _Missing:
    """No part of the value at this path."""


MISSING: Any = _Missing()


def redaction_path_name(path: str) -> str:
    """How a redacted path is recorded in ``redaction_fields`` ("" is the whole value)."""
    return path or WHOLE_VALUE


def part_at(value: Any, path: str) -> Any:
    """The part of ``value`` at dotted ``path`` ("" or "value": the whole value;
    ``value.card.number`` and ``card.number`` are the same part), or :data:`MISSING`."""
    if path in {"", WHOLE_VALUE}:
        return value
    node = value
    for part in path.removeprefix(f"{WHOLE_VALUE}.").split("."):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return MISSING
    return node


def _replace(value: Any, path: str) -> Any:
    """``value`` with the part at ``path`` (which exists) rewritten to the marker, in place."""
    if path in {"", WHOLE_VALUE}:
        return REDACTION_MARKER
    parts = path.removeprefix(f"{WHOLE_VALUE}.").split(".")
    node = value
    for part in parts[:-1]:
        node = node[int(part)] if isinstance(node, list) else node[part]
    last = parts[-1]
    if isinstance(node, list):
        node[int(last)] = REDACTION_MARKER
    else:
        node[last] = REDACTION_MARKER
    return value


def renderings_of(part: Any) -> list[str]:
    """Every rendering of a redacted part that may appear in the record's text, longest
    first (so a longer rendering is replaced before a shorter one inside it)."""
    if isinstance(part, str):
        found = [part, json.dumps(part)[1:-1]] if part else []
    elif isinstance(part, bool) or part is None:
        found = []  # "true" or "null" in a text is not the secret
    elif isinstance(part, int | float):
        found = [str(part)]
    else:
        found = [canonical_json(part), json.dumps(part)]
        items = part.values() if isinstance(part, dict) else part
        for item in items:
            found.extend(renderings_of(item))
    return sorted({s for s in found if s}, key=len, reverse=True)


def redaction_apply(value: Any, content: str, parts: dict[str, Any]) -> tuple[Any, str]:
    """``(value, content)`` with each of ``parts`` (path -> the part found there by
    :func:`part_at`) rewritten to the marker; ``value`` itself is left as it was."""
    value = copy.deepcopy(value)
    for path, part in parts.items():
        value = _replace(value, path)
        for text in renderings_of(part):
            content = content.replace(text, REDACTION_MARKER)
    return value, content
