"""Template filters of the review console."""

from __future__ import annotations

import json
from typing import Any

from django import template

from apps.review.claims import claim_in_force

register = template.Library()


@register.filter
def json_value(value: Any) -> str:
    """A stored JSON value as JSON (quoted strings, no Python reprs), indented when nested."""
    nested = isinstance(value, dict | list) and len(json.dumps(value, ensure_ascii=False)) > 60
    return json.dumps(value, ensure_ascii=False, sort_keys=True, indent=2 if nested else None)


@register.filter
def conditions(value: Any) -> str:
    """Scope conditions as ``name=value`` pairs, or a dash when there are none."""
    if not value:
        return "—"
    if isinstance(value, dict):
        return ", ".join(f"{name}={json_value(item)}" for name, item in sorted(value.items()))
    return json_value(value)


@register.filter
def upto(value: Any, separator: str) -> str:
    """The text before ``separator``: ``"3 days, 4 hours"|upto:","`` is "3 days" (a row shows
    the largest unit; the exact time is in the title)."""
    return str(value).split(separator, 1)[0]


@register.filter
def claim_at(item: Any, now: Any) -> Any:
    """The promotion request's or the conflict's claim in force at ``now`` (None when nobody
    holds it)."""
    return claim_in_force(item, now) if now else None
