"""Console forms of the runs and obligations page."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django import forms
from django.http import QueryDict
from django.utils.dateparse import parse_datetime

from .models import ObligationState, RunState


@dataclass(frozen=True)
class Cursor:
    """A keyset position: the (time, id) of the last row shown; the next page starts after it."""

    at: datetime
    id: uuid.UUID

    def encode(self) -> str:
        return f"{self.at.isoformat()}~{self.id}"


def cursor_parse(value: str) -> Cursor | None:
    at_text, _, id_text = value.partition("~")
    at = parse_datetime(at_text)
    try:
        pk = uuid.UUID(id_text)
    except ValueError:
        return None
    if at is None or at.tzinfo is None:
        return None
    return Cursor(at, pk)


class CursorField(forms.CharField):
    widget = forms.HiddenInput

    def to_python(self, value: Any) -> Cursor | None:  # type: ignore[override]
        text = super().to_python(value)
        if not text:
            return None
        cursor = cursor_parse(text)
        if cursor is None:
            raise forms.ValidationError("This page link is damaged; start from the first page.")
        return cursor


class RunsFilterForm(forms.Form):
    """Filters of the runs and obligations page (all optional) and each list's cursor."""

    task_id = forms.CharField(
        required=False, max_length=200, label="Task id", help_text="Exact task id."
    )
    run_state = forms.ChoiceField(
        required=False,
        label="Runs",
        choices=[("", "Open and closed"), *RunState.choices],
    )
    state = forms.ChoiceField(
        required=False,
        label="Obligations",
        choices=[("", "Any state"), *ObligationState.choices],
    )
    overdue = forms.BooleanField(
        required=False, label="Only overdue", help_text="Pending and past their deadline."
    )
    runs_after = CursorField(required=False)
    obligations_after = CursorField(required=False)

    FILTER_FIELDS = ("task_id", "run_state", "state", "overdue")

    def query_for(self, **cursors: str) -> str:
        """These filters' query string with other cursors (for the pager links)."""
        query = QueryDict(mutable=True)
        if self.is_bound:
            for name in (*self.FILTER_FIELDS, "runs_after", "obligations_after"):
                value = self.data.get(name)
                if value and name not in cursors:
                    query[name] = value
        for name, value in cursors.items():
            if value:
                query[name] = value
        return query.urlencode()
