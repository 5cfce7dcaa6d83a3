"""Forms of the console's memory browser: the search and filters, deletion and redaction."""

from __future__ import annotations

from typing import Any

from django import forms
from django.http import QueryDict

from apps.core.pagination import CursorField

from .models import RecordStatus, Sensitivity, Trust
from .redaction import REDACTION_MARKER, WHOLE_VALUE

ANY = [("", "Any")]

# Paths offered for redaction; a value with more parts is redacted whole or by its first ones.
REDACTABLE_PATHS_AT_MOST = 200


class MemoryFilterForm(forms.Form):
    """The browser's query (scoped search) and filters, with the list's keyset cursors."""

    q = forms.CharField(
        required=False,
        max_length=2000,
        label="Search",
        help_text="Words to look for; ranks current memories by relevance.",
        widget=forms.TextInput(attrs={"type": "search", "spellcheck": "false"}),
    )
    subject = forms.CharField(
        required=False, max_length=200, help_text="Exact, e.g. user:8812.", strip=True
    )
    key = forms.CharField(
        required=False, max_length=200, help_text="Exact, e.g. shipping.preference.", strip=True
    )
    domain = forms.CharField(required=False, max_length=100, label="Scope domain", strip=True)
    trust = forms.ChoiceField(required=False, choices=ANY + list(Trust.choices))
    sensitivity = forms.ChoiceField(required=False, choices=ANY + list(Sensitivity.choices))
    status = forms.ChoiceField(required=False, choices=ANY + list(RecordStatus.choices))
    versions = forms.ChoiceField(
        required=False,
        label="Versions",
        choices=[
            ("", "Every live version"),
            ("current", "Current versions only"),
        ],
        help_text="Earlier versions and conflict contenders are live too.",
    )
    expiring_within = forms.ChoiceField(
        required=False,
        label="Expiring",
        choices=[("", "Any time"), ("7", "Within 7 days"), ("30", "Within 30 days")],
    )
    before = CursorField(required=False)
    after = CursorField(required=False)

    FILTER_FIELDS = (
        "q",
        "subject",
        "key",
        "domain",
        "trust",
        "sensitivity",
        "status",
        "versions",
        "expiring_within",
    )

    def filters(self) -> dict[str, str]:
        """The list filters, named as ``records_list`` takes them."""
        data = self.cleaned_data
        return {
            "subject": data.get("subject") or "",
            "key": data.get("key") or "",
            "domain": data.get("domain") or "",
            "trust": data.get("trust") or "",
            "sensitivity": data.get("sensitivity") or "",
            "status": data.get("status") or "",
            "versions": data.get("versions") or "",
            "expiring_within": data.get("expiring_within") or "",
        }

    def query_for(self, **cursor: str) -> str:
        """The query string of these filters with another cursor (for the pager links)."""
        query = QueryDict(mutable=True)
        if self.is_bound:
            for name in self.FILTER_FIELDS:
                value = self.data.get(name)
                if value:
                    query[name] = value
        for name, value in cursor.items():
            query[name] = value
        return query.urlencode()


class MemoryDeleteForm(forms.Form):
    """Confirms a deletion. The nonce makes a repeated submission of one form harmless."""

    reason = forms.CharField(
        max_length=500,
        help_text="Why this memory goes. Kept on the deletion receipt and in the audit log.",
        widget=forms.TextInput(attrs={"autocomplete": "off"}),
    )
    nonce = forms.CharField(max_length=64, widget=forms.HiddenInput)

    def clean_reason(self) -> str:
        reason: str = self.cleaned_data["reason"].strip()
        if not reason:
            raise forms.ValidationError("Say why this memory is deleted.")
        return reason


def redactable_paths(value: Any, prefix: str = WHOLE_VALUE) -> list[tuple[str, Any]]:
    """``(path, part)`` for each part of ``value`` that can be redacted, in document order.

    Paths are dotted (``value.address.street``, ``value.items.0``), as the redaction service
    takes them. A key containing a dot cannot be named that way: its parent is offered
    instead. Parts already redacted are left out.
    """
    found: list[tuple[str, Any]] = []

    def walk(node: Any, path: str) -> None:
        if len(found) >= REDACTABLE_PATHS_AT_MOST:
            return
        if isinstance(node, dict):
            items: list[tuple[str, Any]] = [(str(k), v) for k, v in node.items()]
        elif isinstance(node, list):
            items = [(str(i), v) for i, v in enumerate(node)]
        else:
            return
        for name, child in items:
            if "." in name or not name or child == REDACTION_MARKER:
                continue
            child_path = f"{path}.{name}"
            found.append((child_path, child))
            walk(child, child_path)

    walk(value, prefix)
    return found


def _label(path: str, part: Any) -> str:
    if isinstance(part, dict | list):
        return f"{path} (all of it)"
    shown = str(part)
    return f"{path} = {shown[:60]}{'…' if len(shown) > 60 else ''}"


class MemoryRedactForm(forms.Form):
    """Chooses the parts of one record's value to rewrite to the redaction marker."""

    parts = forms.MultipleChoiceField(
        label="Parts to redact",
        widget=forms.CheckboxSelectMultiple,
        help_text="Each part is replaced by “[REDACTED]” in the value and in the memory's text.",
        error_messages={"required": "Choose at least one part to redact."},
    )
    reason = forms.CharField(
        max_length=500,
        help_text="Why. Kept in the audit log (the redacted content is not).",
        widget=forms.TextInput(attrs={"autocomplete": "off"}),
    )
    nonce = forms.CharField(max_length=64, widget=forms.HiddenInput)

    def __init__(self, *args: Any, value: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        choices = [(WHOLE_VALUE, "The whole value (and its text)")]
        choices += [(path, _label(path, part)) for path, part in redactable_paths(value)]
        field = self.fields["parts"]
        assert isinstance(field, forms.MultipleChoiceField)
        field.choices = choices

    def clean_reason(self) -> str:
        reason: str = self.cleaned_data["reason"].strip()
        if not reason:
            raise forms.ValidationError("Say why these parts are redacted.")
        return reason
