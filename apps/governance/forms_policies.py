"""Console forms of retention rules and legal holds: they parse input; the services decide."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta
from typing import Any

from django import forms
from django.utils.dateparse import parse_duration

from apps.core.pagination import CursorField
from apps.records.models import DEFAULT_RETENTION, Sensitivity

from .forms import KeysetFilterForm, reason_field, value_field

NO_LIMIT_WORDS = {"", "none", "no limit", "never"}
_SHORT_DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*(d|day|days|h|hour|hours|w|week|weeks)?$")
_UNITS = {"d": 1.0, "day": 1.0, "days": 1.0, "w": 7.0, "week": 7.0, "weeks": 7.0}
LONGEST = timedelta(days=36500)


def duration_parse(text: str) -> timedelta | None:
    """``30`` or ``30d`` (days), ``12h``, ``2w``, or ISO 8601 (``P30D``); None if unreadable."""
    text = text.strip().lower()
    match = _SHORT_DURATION.match(text)
    if match:
        amount, unit = float(match.group(1)), match.group(2) or "d"
        if unit.startswith("h"):
            return timedelta(hours=amount)
        return timedelta(days=amount * _UNITS[unit])
    return parse_duration(text.upper()) if text.startswith("p") else None


def duration_text(value: timedelta | None) -> str:
    """The shortest input that reads back as ``value`` (``none`` for no limit)."""
    if value is None:
        return "none"
    seconds = int(value.total_seconds())
    for suffix, size in (("d", 86400), ("h", 3600)):
        if seconds % size == 0:
            return f"{seconds // size}{suffix}"
    return f"PT{seconds}S"


def duration_words(value: timedelta | None) -> str:
    """``value`` for reading: "30 days", "12 hours", or "no limit"."""
    if value is None:
        return "no limit"
    seconds = int(value.total_seconds())
    for unit, size in (("day", 86400), ("hour", 3600)):
        if seconds % size == 0:
            return f"{seconds // size} {unit}{'s' if seconds != size else ''}"
    return f"{seconds} seconds"


class RetentionRuleForm(forms.Form):
    """One sensitivity class's longest lifetimes. ``none`` (no limit) is accepted for the
    confirmed lifetime only where the class's default has none: expiry by default stays the
    rule for every class that starts with a limit."""

    sensitivity = forms.ChoiceField(choices=Sensitivity.choices, widget=forms.HiddenInput)
    provisional_max = forms.CharField(
        max_length=40,
        label="Provisional lifetime",
        help_text="e.g. 30d, 12h, 2w.",
        widget=forms.TextInput(attrs={"size": 8, "spellcheck": "false"}),
    )
    confirmed_max = forms.CharField(
        max_length=40,
        required=False,
        label="Confirmed lifetime",
        help_text="e.g. 365d; “none” for no limit where the class allows it.",
        widget=forms.TextInput(attrs={"size": 8, "spellcheck": "false"}),
    )

    # The confirmation step, when the change shortens records already written: the counts
    # the person saw (a change in them means the preview is out of date) and why.
    confirm = forms.BooleanField(required=False, widget=forms.HiddenInput)
    expected_expired = forms.IntegerField(required=False, min_value=0, widget=forms.HiddenInput)
    expected_shortened = forms.IntegerField(required=False, min_value=0, widget=forms.HiddenInput)
    reason = forms.CharField(
        max_length=2000,
        required=False,
        label="Reason",
        help_text="Kept with the change in the audit log.",
        widget=forms.TextInput(attrs={"size": 40}),
    )

    def previewed_counts(self) -> tuple[int, int] | None:
        """The (expired, shortened) counts the person confirmed, or None (no confirmation)."""
        data = self.cleaned_data
        if not data.get("confirm"):
            return None
        expired, shortened = data.get("expected_expired"), data.get("expected_shortened")
        if expired is None or shortened is None:
            return None
        return expired, shortened

    def clean_provisional_max(self) -> timedelta:
        return _lifetime(self.cleaned_data["provisional_max"], "30d, 12h or 2w")

    def clean_confirmed_max(self) -> timedelta | None:
        raw = self.cleaned_data.get("confirmed_max", "").strip().lower()
        if raw in NO_LIMIT_WORDS:
            sensitivity = self.data.get("sensitivity", "")
            default = DEFAULT_RETENTION.get(sensitivity, (None, timedelta(1)))[1]
            if default is not None:
                raise forms.ValidationError(
                    f"{sensitivity.capitalize()} records need a limit "
                    f"(the default is {duration_text(default)})."
                )
            return None
        return _lifetime(raw, "365d, or “none”")


def _lifetime(text: str, examples: str) -> timedelta:
    value = duration_parse(text)
    if value is None:
        raise forms.ValidationError(f"Write a length such as {examples}.")
    if value <= timedelta(0):
        raise forms.ValidationError("Must be longer than zero.")
    if value > LONGEST:
        raise forms.ValidationError("At most 100 years.")
    return value


HOLD_TARGETS = (("subject", "A subject (all its facts)"), ("record", "A record id (its fact)"))


class LegalHoldPlaceForm(forms.Form):
    target = forms.ChoiceField(
        choices=HOLD_TARGETS, widget=forms.RadioSelect, label="Hold", initial="subject"
    )
    value = value_field(
        "Subject or record id", "A subject exactly as written (user:1042), or a record's id."
    )
    reason = reason_field("e.g. “litigation hold, case 2026-114”.")
    nonce = forms.CharField(max_length=64, widget=forms.HiddenInput)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("target") == "record" and data.get("value"):
            try:
                data["record_id"] = uuid.UUID(data["value"])
            except ValueError:
                self.add_error("value", "A record id looks like 3f2b…-…; check it.")
        return data


HOLD_STATES = (("active", "Active"), ("lifted", "Lifted"), ("all", "All"))


class LegalHoldLiftForm(forms.Form):
    """Why a hold is lifted: kept in the audit log with the lift."""

    reason = forms.CharField(
        max_length=2000,
        label="Reason for lifting",
        error_messages={
            "required": "Say why you lift the hold: the reason is kept in the audit log."
        },
    )


class LegalHoldFilterForm(KeysetFilterForm):
    FILTER_FIELDS = ("state",)
    state = forms.ChoiceField(required=False, choices=HOLD_STATES, label="Show")
    before = CursorField(required=False)

    def clean_state(self) -> str:
        return self.cleaned_data.get("state") or "active"
