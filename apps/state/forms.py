"""Console forms of the runs and obligations page."""

from __future__ import annotations

from django import forms
from django.http import QueryDict

from apps.core.pagination import CursorField

from .models import ObligationState, RunState


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
