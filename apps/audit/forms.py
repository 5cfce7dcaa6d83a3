"""The console's audit log filter."""

from __future__ import annotations

from typing import Any

from django import forms
from django.http import QueryDict


class AuditFilterForm(forms.Form):
    """Filters of the audit log page (all optional) and its keyset cursors."""

    actor = forms.CharField(
        required=False, max_length=200, help_text="Username or credential name."
    )
    action = forms.CharField(
        required=False,
        max_length=64,
        help_text="Prefix, e.g. “credential”.",
        widget=forms.TextInput(attrs={"list": "audit-actions", "spellcheck": "false"}),
    )
    object_id = forms.CharField(
        required=False, max_length=64, label="Object id", help_text="Exact id."
    )
    since = forms.DateTimeField(
        required=False,
        label="Since",
        help_text="Date and time, UTC.",
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
    )
    before = forms.IntegerField(required=False, min_value=1, widget=forms.HiddenInput)
    after = forms.IntegerField(required=False, min_value=0, widget=forms.HiddenInput)

    FILTER_FIELDS = ("actor", "action", "object_id", "since")

    def filters(self) -> dict[str, Any]:
        """The cleaned filters, for the selector (empty when the form is invalid)."""
        if not self.is_valid():
            return {}
        data = self.cleaned_data
        return {name: data.get(name) or "" for name in ("actor", "action", "object_id")} | {
            "since": data.get("since")
        }

    def query_for(self, **cursor: int) -> str:
        """The query string of these filters with another cursor (for the pager links)."""
        query = QueryDict(mutable=True)
        if self.is_bound:
            for name in self.FILTER_FIELDS:
                value = self.data.get(name)
                if value:
                    query[name] = value
        for name, value in cursor.items():
            query[name] = str(value)
        return query.urlencode()
