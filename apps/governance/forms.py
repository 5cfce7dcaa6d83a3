"""Console forms of deletions and erasures: they parse input; the services decide."""

from __future__ import annotations

from typing import Any

from django import forms
from django.http import QueryDict

from apps.core.pagination import CursorField

RECEIPT_KINDS = ("record", "erasure", "expiry")


class KeysetFilterForm(forms.Form):
    """A listing's filters (``FILTER_FIELDS``); its ``before`` (a ``CursorField``, declared
    last) is the last row of the previous page (newest first)."""

    FILTER_FIELDS: tuple[str, ...] = ()

    def query_for(self, **cursor: str) -> str:
        """The query string of the filters as given, and ``cursor``."""
        query = QueryDict(mutable=True)
        for name in self.FILTER_FIELDS if self.is_bound else ():
            if value := self.data.get(name):
                query[name] = value
        query.update(cursor)
        return query.urlencode()


class DeletionFilterForm(KeysetFilterForm):
    """Filters of the deletion history (all optional) and its keyset cursor."""

    kind = forms.ChoiceField(
        required=False, choices=[("", "Any kind"), *((kind, kind) for kind in RECEIPT_KINDS)]
    )
    who = forms.CharField(
        required=False, max_length=200, label="Requested by", help_text="Username or credential."
    )
    since = forms.DateField(
        required=False, label="From", widget=forms.DateInput(attrs={"type": "date"})
    )
    until = forms.DateField(
        required=False, label="To", widget=forms.DateInput(attrs={"type": "date"})
    )
    parent = forms.UUIDField(required=False, widget=forms.HiddenInput)
    before = CursorField(required=False)

    FILTER_FIELDS = ("kind", "who", "since", "until", "parent")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        since, until = data.get("since"), data.get("until")
        if since and until and until < since:
            self.add_error("until", "The end date is before the start date.")
        return data

    def filters(self) -> dict[str, Any]:
        if not self.is_bound or not self.is_valid():
            return {}
        return {name: self.cleaned_data.get(name) for name in self.FILTER_FIELDS}

    @property
    def filtered(self) -> bool:
        return self.is_bound and any(self.data.get(name) for name in self.FILTER_FIELDS)


SELECTOR_CHOICES = (
    ("subject", "Subject (every fact about it)"),
    ("owner", "Owner (everything a user or service is accountable for)"),
    ("consent_ref", "Consent reference (everything written under a consent)"),
)


def value_field(label: str, help_text: str) -> forms.CharField:
    """What an erasure or a hold names, typed exactly as written."""
    attrs = {"spellcheck": "false", "autocomplete": "off"}
    return forms.CharField(
        max_length=200, label=label, help_text=help_text, widget=forms.TextInput(attrs=attrs)
    )


def reason_field(help_text: str) -> forms.CharField:
    return forms.CharField(
        max_length=2000, label="Reason", help_text=help_text, widget=forms.Textarea({"rows": 2})
    )


class ErasureForm(forms.Form):
    """Erase by exactly one of subject, owner or consent reference, with a reason."""

    selector = forms.ChoiceField(
        choices=SELECTOR_CHOICES, widget=forms.RadioSelect, label="Erase by", initial="subject"
    )
    value = value_field("Value", "Exactly as written, e.g. user:1042 or consent-2025-17.")
    reason = reason_field("Kept on the deletion receipt, e.g. “GDPR art. 17 request #4411”.")


class ErasureConfirmForm(ErasureForm):
    """The confirmed erasure: the same fields, the count that was shown, a one-time nonce."""

    records = forms.IntegerField(min_value=0, widget=forms.HiddenInput)
    nonce = forms.CharField(max_length=64, widget=forms.HiddenInput)
