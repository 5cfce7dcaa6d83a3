"""Console forms of the evaluation pages."""

from __future__ import annotations

from datetime import UTC
from typing import Any

from django import forms

from apps.core.pagination import CursorField

from .selectors import CHANGE_KINDS, AtRiskFilters

CHANGE_LABELS = {
    "superseded": "superseded by a newer version",
    "redacted": "redacted",
    "deleted": "deleted or erased",
    "expired": "expired",
    "in_conflict": "contradicted (open conflict)",
    "unconfirmed": "returned to provisional",
}


class DecisionsAtRiskFilterForm(forms.Form):
    """The filters of the decisions-at-risk page (all optional) and its cursor."""

    change = forms.ChoiceField(
        required=False,
        label="What changed",
        choices=[("", "Any change"), *((kind, CHANGE_LABELS[kind]) for kind in CHANGE_KINDS)],
    )
    credential = forms.UUIDField(
        required=False, label="Credential id", help_text="The searching credential's id."
    )
    memory = forms.UUIDField(required=False, label="Memory id")
    since = forms.DateTimeField(
        required=False,
        label="Searched since",
        help_text="Date and time, UTC.",
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
    )
    cursor = CursorField(required=False)

    FILTER_FIELDS = ("change", "credential", "memory", "since")

    def filters(self) -> AtRiskFilters:
        data: dict[str, Any] = self.cleaned_data if self.is_valid() else {}
        since = data.get("since")
        if since is not None and since.tzinfo is None:
            since = since.replace(tzinfo=UTC)
        return AtRiskFilters(
            change=data.get("change") or "",
            credential=str(data["credential"]) if data.get("credential") else "",
            memory=data.get("memory"),
            since=since,
        )

    def filtered(self) -> bool:
        return self.is_valid() and any(self.cleaned_data.get(f) for f in self.FILTER_FIELDS)


class EvaluationStartForm(forms.Form):
    against_cache = forms.BooleanField(
        required=False,
        initial=True,
        label="Beside a cache",
        help_text="Run the same scenarios against a plain nearest-neighbour cache too.",
    )
