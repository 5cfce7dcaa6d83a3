"""Template filters of the console."""

from __future__ import annotations

from typing import Any

from django import template

register = template.Library()


@register.filter
def audit_value(value: Any) -> str:
    """An audit event's data value as a reader expects it: lists comma-separated, no reprs."""
    if value is None:
        return "—"
    if isinstance(value, list | tuple):
        return ", ".join(audit_value(item) for item in value) or "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict):
        return "; ".join(f"{key}: {audit_value(item)}" for key, item in value.items())
    return str(value)
