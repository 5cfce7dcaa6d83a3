"""Forms of the review console: queue filters, decisions, bulk approval, conflict resolution."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from typing import Any, Generic, TypeVar

from django import forms
from django.http import QueryDict

from apps.core.pagination import CursorField
from apps.records.models import Resolution, Sensitivity, SourceKind
from apps.review.claims import CLAIM_BATCH_LIMIT
from apps.review.models import REVIEW_REASONS_PER_DECISION, ReasonDecision, ReviewReason
from apps.review.queues import (
    BULK_APPROVE_LIMIT,
    ClaimFilter,
    ConflictGroup,
    ConflictOrder,
    ConflictQueueFilters,
    PromotionQueueFilters,
    QueueGroup,
    QueueOrder,
)
from apps.review.reasons import CLAIM_DURATION_MAX, CLAIM_DURATION_MIN, review_reason_get

REASON_MAX_LENGTH = 2000
Filters = TypeVar("Filters", PromotionQueueFilters, ConflictQueueFilters)

PENDING_AGE_CHOICES = (
    ("", "Any age"),
    ("1", "1 day or more"),
    ("7", "7 days or more"),
    ("30", "30 days or more"),
)

SOURCE_KIND_LABELS = {
    SourceKind.INTERACTION: "Interaction",
    SourceKind.TOOL_CALL: "Tool call",
    SourceKind.DOCUMENT: "Document",
    SourceKind.USER_ACTION: "Person's action",
    SourceKind.DERIVED: "Derived",
}
SENSITIVITY_CHOICES = [("", "Any sensitivity"), *((v, v.capitalize()) for v in Sensitivity.values)]


class QueueFilterForm(forms.Form, Generic[Filters]):
    """What both queues filter on (all optional), their keyset cursors, and how their one-line
    filter bar folds the rarely used filters behind "More filters" (``MORE_FIELDS``)."""

    after = CursorField(required=False)
    before = CursorField(required=False)

    FILTER_FIELDS: tuple[str, ...] = ()
    # Kept in pager links like the filters, but not a filter: it selects nothing.
    ORDER_FIELDS: tuple[str, ...] = ()

    def query_for(self, **cursor: str) -> str:
        """The query string of this form's filters with another cursor (pager links)."""
        query = QueryDict(mutable=True)
        if self.is_bound:
            for name in self.FILTER_FIELDS + self.ORDER_FIELDS:
                value = self.data.get(name)
                if value:
                    query[name] = value
        for name, value in cursor.items():
            query[name] = value
        return query.urlencode()

    key = forms.CharField(
        required=False,
        max_length=200,
        help_text="Exact key or a prefix, e.g. “shipping.”.",
        # The queue's one-line filter bar shows no help text: the placeholder says it.
        widget=forms.TextInput(attrs={"spellcheck": "false", "placeholder": "Key or prefix"}),
    )
    subject = forms.CharField(
        required=False,
        max_length=200,
        help_text="Exact, e.g. “user:8812”.",
        widget=forms.TextInput(attrs={"spellcheck": "false", "placeholder": "Subject, exactly"}),
    )
    domain = forms.CharField(
        required=False,
        max_length=100,
        help_text="Scope domain, e.g. “commerce”.",
        widget=forms.TextInput(attrs={"spellcheck": "false"}),
    )
    claim = forms.ChoiceField(required=False, label="Claimed", choices=ClaimFilter.choices)
    # One key exactly (a group's link); the key field above is a prefix.
    key_exact = forms.CharField(required=False, max_length=200, widget=forms.HiddenInput)

    MORE_FIELDS: tuple[str, ...] = ()
    FILTERS: type[Filters]

    def __init__(self, *args: Any, reviewer_id: str = "", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # "Held by me" means the person looking (claims filters read it).
        self.reviewer_id = reviewer_id

    def more_fields(self) -> list[forms.BoundField]:
        return [self[name] for name in self.MORE_FIELDS]

    @property
    def more_in_use(self) -> int:
        """How many of the folded filters are set (the disclosure says so while folded)."""
        return sum(1 for name in self.MORE_FIELDS if self.is_bound and self.data.get(name))

    def _chosen(self, name: str) -> str:
        if not self.is_bound or not self.is_valid():
            return ""
        return self.cleaned_data.get(name) or ""

    @property
    def grouping(self) -> str:
        return self._chosen("group")

    @property
    def order(self) -> str:
        return self._chosen("sort")

    def filters(self) -> Filters:
        """The cleaned filters (none when the form is unbound or invalid), as ``FILTERS``."""
        if not self.is_bound or not self.is_valid():
            return self.FILTERS()
        chosen: dict[str, Any] = {
            name: (self.cleaned_data.get(name) or "").strip() for name in self.FILTER_FIELDS
        }
        age = chosen.pop("age")
        return self.FILTERS(
            **chosen,
            pending_at_least=timedelta(days=int(age)) if age else None,
            reviewer_id=self.reviewer_id,
        )

    def filter_summary(self) -> list[tuple[str, str]]:
        """(label, value) of each filter in use, to say what a bulk decision covers."""
        if not self.is_bound or not self.is_valid():
            return []
        summary = []
        for name in self.FILTER_FIELDS:
            value = self.cleaned_data.get(name)
            if value:
                field = self[name]
                choices = dict(getattr(field.field, "choices", ()))
                label = "Key (exactly)" if name == "key_exact" else str(field.label)
                summary.append((label, str(choices.get(value, value))))
        return summary


class PromotionQueueFilterForm(QueueFilterForm[PromotionQueueFilters]):
    """Filters of the promotion queue (all optional) and its keyset cursors."""

    sensitivity = forms.ChoiceField(required=False, choices=SENSITIVITY_CHOICES)
    age = forms.ChoiceField(
        required=False, label="Pending for", choices=PENDING_AGE_CHOICES, help_text="At least."
    )
    writer = forms.CharField(
        required=False,
        max_length=200,
        help_text="Who wrote the record, e.g. “checkout-agent”.",
        widget=forms.TextInput(attrs={"spellcheck": "false"}),
    )
    source = forms.ChoiceField(
        required=False,
        label="Source",
        choices=[("", "Any source"), *SOURCE_KIND_LABELS.items()],
    )

    sort = forms.ChoiceField(required=False, label="Order", choices=QueueOrder.choices)
    group = forms.ChoiceField(required=False, label="Group by", choices=QueueGroup.choices)

    FILTER_FIELDS = (
        "key",
        "key_exact",
        "subject",
        "domain",
        "sensitivity",
        "writer",
        "source",
        "age",
        "claim",
    )
    ORDER_FIELDS = ("sort", "group")
    # Folded behind "More filters" in the queue's filter bar: used less than key and subject.
    MORE_FIELDS = ("domain", "sensitivity", "writer", "source", "age", "claim", "group")
    FILTERS = PromotionQueueFilters


class ConflictQueueForm(QueueFilterForm[ConflictQueueFilters]):
    """Filters of the conflict queue (all optional), its order, grouping and keyset cursors."""

    sensitivity = forms.ChoiceField(
        required=False, choices=SENSITIVITY_CHOICES, help_text="Of the current value."
    )
    age = forms.ChoiceField(
        required=False, label="Open for", choices=PENDING_AGE_CHOICES, help_text="At least."
    )
    sort = forms.ChoiceField(required=False, label="Order", choices=ConflictOrder.choices)
    group = forms.ChoiceField(required=False, label="Group by", choices=ConflictGroup.choices)
    FILTERS = ConflictQueueFilters

    FILTER_FIELDS = ("key", "key_exact", "subject", "domain", "sensitivity", "age", "claim")
    ORDER_FIELDS = ("sort", "group")
    MORE_FIELDS = ("domain", "sensitivity", "age", "claim", "group")


class _DecisionForm(forms.Form):
    """A decision's reason: typed, or one of the tenant's canned reasons by id (``canned``,
    its number key in the queue). A canned reason that is gone, belongs to the other decision
    or to another tenant is a form error, and nothing is decided."""

    decision: str = ""
    reason = forms.CharField(max_length=REASON_MAX_LENGTH, required=False)
    canned = forms.UUIDField(
        required=False,
        widget=forms.HiddenInput,
        error_messages={"invalid": "That canned reason is not one of this tenant's."},
    )
    MISSING_REASON = ""

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        canned = cleaned.get("canned")
        if canned is not None:
            found = review_reason_get(canned, decision=self.decision)
            if found is None:
                self.add_error(
                    "reason",
                    "That canned reason no longer exists (a lead may have removed it): "
                    "type the reason, or pick another.",
                )
                return cleaned
            cleaned["reason"] = found.text
        if "canned" in self.errors:
            self.add_error("reason", "That canned reason is not one of this tenant's.")
        elif not (cleaned.get("reason") or "").strip() and "reason" not in self.errors:
            self.add_error("reason", self.MISSING_REASON)
        return cleaned


class ApproveForm(_DecisionForm):
    decision = ReasonDecision.APPROVE
    MISSING_REASON = "Say why you approve it: the reason is kept with the request."


class RejectForm(_DecisionForm):
    decision = ReasonDecision.REJECT
    MISSING_REASON = "Say why you reject it: the reason is kept with the request."


class ReverseForm(forms.Form):
    """Return an approval to provisional, or reopen a rejection: always with a reason."""

    reason = forms.CharField(
        max_length=REASON_MAX_LENGTH,
        label="Reason",
        error_messages={"required": "Say why the decision is reversed: the reason is audited."},
    )


def _carry_filters(form: QueueFilterForm[Any]) -> None:
    """A confirmation carries the queue's filters hidden (to go back to the same queue, and
    to decide only what still matches them); a bulk decision takes the oldest matching items,
    whatever the queue's order or grouping."""
    for name in form.FILTER_FIELDS:
        form.fields[name].widget = forms.HiddenInput()
    for name in form.ORDER_FIELDS:
        del form.fields[name]


class RequestSnapshotField(forms.Field):
    """The ids of the requests a confirmation listed, one hidden input each."""

    widget = forms.MultipleHiddenInput
    default_error_messages = {
        "required": "This confirmation lists no request; go back to the queue and start again.",
        "invalid": "This confirmation is damaged (an id is not valid); start again from the queue.",
        "too_many": "This confirmation lists more requests than one bulk approval takes.",
    }

    def __init__(self, *, max_items: int, **kwargs: Any) -> None:
        self.max_items = max_items
        super().__init__(**kwargs)

    def to_python(self, value: Any) -> list[uuid.UUID]:
        if not value:
            return []
        values = value if isinstance(value, list | tuple) else [value]
        try:
            ids = list(dict.fromkeys(uuid.UUID(str(item)) for item in values))
        except ValueError as error:
            raise forms.ValidationError(self.error_messages["invalid"], code="invalid") from error
        if len(ids) > self.max_items:
            raise forms.ValidationError(self.error_messages["too_many"], code="too_many")
        return ids


class BulkApproveForm(PromotionQueueFilterForm):
    """Approve (or reject) exactly the pending requests a confirmation listed: a snapshot of
    their ids beside the filters that produced them, hidden. Those still pending and matching
    are decided; none is added, and each left alone is reported."""

    requests = RequestSnapshotField(max_items=BULK_APPROVE_LIMIT)
    decision = forms.ChoiceField(
        choices=[("approve", "Approve"), ("reject", "Reject")],
        required=False,
        widget=forms.HiddenInput,
    )
    nonce = forms.CharField(widget=forms.HiddenInput, max_length=64)
    reason = forms.CharField(
        max_length=REASON_MAX_LENGTH,
        label="Reason for approving these",
        help_text="Kept with every approved request, e.g. “verified against the CRM export”.",
        error_messages={"required": "Say why you approve them: the reason is kept with each."},
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _carry_filters(self)
        if self.rejects:
            reason = self.fields["reason"]
            reason.label = "Reason for rejecting these"
            reason.help_text = "Kept with every rejected request, e.g. “the CRM has no such order”."
            reason.error_messages["required"] = (
                "Say why you reject them: the reason is kept with each."
            )

    @property
    def rejects(self) -> bool:
        """A bulk rejection rather than an approval (both confirm a snapshot the same way)."""
        source = self.data if self.is_bound else self.initial
        return source.get("decision") == "reject"


class SelectionForm(PromotionQueueFilterForm):
    """The requests a reviewer ticked in the queue, with the queue's filters: the start of a
    confirmation that lists exactly them."""

    requests = RequestSnapshotField(max_items=BULK_APPROVE_LIMIT)
    decision = forms.ChoiceField(choices=[("approve", "Approve"), ("reject", "Reject")])


# What a bulk resolution may decide: a corrected value is one conflict's own.
BULK_RESOLUTIONS = [
    (Resolution.KEEP_CURRENT, "Keep the current values"),
    (Resolution.ACCEPT_NEW, "Accept the new values"),
]


class ConflictSelectionForm(ConflictQueueForm):
    """The conflicts a reviewer ticked, with the queue's filters and the resolution chosen:
    the start of a confirmation that lists exactly them."""

    conflicts = RequestSnapshotField(
        max_items=BULK_APPROVE_LIMIT,
        error_messages={"required": "Tick the conflicts to resolve first."},
    )
    resolution = forms.ChoiceField(
        choices=BULK_RESOLUTIONS,
        error_messages={"required": "Choose how to resolve them: keep current or accept new."},
    )


class ConflictBulkForm(ConflictQueueForm):
    """Resolve exactly the open conflicts a confirmation listed, all the same way and for one
    reason (each resolution is audited on its own). As for promotion requests, the snapshot
    of ids travels with the filters that produced it, and nothing outside it is resolved."""

    conflicts = RequestSnapshotField(
        max_items=BULK_APPROVE_LIMIT,
        error_messages={
            "required": "This confirmation lists no conflict; go back to the queue and start again."
        },
    )
    resolution = forms.ChoiceField(
        choices=BULK_RESOLUTIONS,
        label="Resolution",
        widget=forms.RadioSelect,
        error_messages={"required": "Choose how to resolve them: keep current or accept new."},
    )
    nonce = forms.CharField(widget=forms.HiddenInput, max_length=64)
    reason = forms.CharField(
        max_length=REASON_MAX_LENGTH,
        label="Reason for resolving these",
        help_text="Kept with every resolution, e.g. “the CRM export is the newer source”.",
        error_messages={"required": "Say why you resolve them so: the reason is kept with each."},
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _carry_filters(self)


class ConflictResolveForm(forms.Form):
    resolution = forms.ChoiceField(
        choices=[
            (Resolution.KEEP_CURRENT, "Keep the current value"),
            (Resolution.ACCEPT_NEW, "Accept the new value"),
            (Resolution.CORRECTED, "Write a corrected value"),
        ],
        widget=forms.RadioSelect,
        error_messages={"required": "Choose how to resolve the conflict."},
    )
    value = forms.CharField(
        required=False,
        label="Corrected value (JSON)",
        help_text='Only for a corrected value, e.g. "carrier_b" or {"carrier": "b"}.',
        widget=forms.Textarea(attrs={"rows": 3, "spellcheck": "false"}),
    )
    reason = forms.CharField(
        max_length=REASON_MAX_LENGTH,
        label="Reason",
        error_messages={"required": "Say why: the reason is kept with the resolution."},
    )

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if cleaned.get("resolution") != Resolution.CORRECTED:
            cleaned["parsed_value"] = None
            return cleaned
        text = (cleaned.get("value") or "").strip()
        if not text:
            self.add_error("value", "Write the corrected value as JSON.")
            return cleaned
        try:
            parsed = json.loads(text)
        except json.JSONDecodeError as error:
            self.add_error(
                "value",
                f"Not valid JSON ({error.msg}, line {error.lineno} column {error.colno}). "
                'Quote text, e.g. "carrier_b".',
            )
            return cleaned
        if parsed is None:
            self.add_error("value", "null is not a value; write the value the fact should hold.")
            return cleaned
        cleaned["parsed_value"] = parsed
        return cleaned


class ClaimForm(forms.Form):
    """Claim or release the requests listed (a row's ``c``, or the ticked ones)."""

    requests = RequestSnapshotField(
        max_items=CLAIM_BATCH_LIMIT,
        error_messages={"required": "Select the requests to claim or release first."},
    )
    action = forms.ChoiceField(
        choices=[("claim", "Claim"), ("release", "Release")],
        error_messages={
            "required": "Say whether to claim or release.",
            "invalid_choice": "Say whether to claim or release.",
        },
    )


class ConflictClaimForm(forms.Form):
    """Claim or release the conflicts listed (a row's button, or the ticked ones)."""

    action = ClaimForm.base_fields["action"]
    conflicts = RequestSnapshotField(
        max_items=CLAIM_BATCH_LIMIT,
        error_messages={"required": "Select the conflicts to claim or release first."},
    )


class ClaimBatchForm(PromotionQueueFilterForm):
    """Claim the next ``size`` requests the queue's filters match that nobody else holds."""

    size = forms.IntegerField(
        min_value=1,
        max_value=CLAIM_BATCH_LIMIT,
        initial=20,
        label="How many",
        error_messages={
            "min_value": "Claim at least one request.",
            "max_value": f"One claim takes at most {CLAIM_BATCH_LIMIT} requests.",
            "required": "Say how many requests to claim.",
            "invalid": "Say how many requests to claim, as a number.",
        },
    )


class ReviewReasonForm(forms.Form):
    """A new canned reason."""

    decision = forms.ChoiceField(
        choices=ReasonDecision.choices,
        label="For",
        error_messages={"required": "Choose approving or rejecting."},
    )
    text = forms.CharField(
        max_length=ReviewReason._meta.get_field("text").max_length,
        label="Reason",
        help_text=f"Up to {REVIEW_REASONS_PER_DECISION} for each decision, on the number keys.",
        error_messages={
            "required": "Write the reason.",
            "max_length": "Keep it to %(limit_value)d characters (this has %(show_value)d).",
        },
    )


class ClaimDurationForm(forms.Form):
    """How long a claim on promotion requests lasts, in minutes."""

    claim_minutes = forms.IntegerField(
        label="A claim lasts (minutes)",
        min_value=int(CLAIM_DURATION_MIN.total_seconds() // 60),
        max_value=int(CLAIM_DURATION_MAX.total_seconds() // 60),
        error_messages={
            "required": "Say how many minutes a claim lasts.",
            "invalid": "Say how many minutes a claim lasts, as a whole number.",
            "min_value": "A claim lasts at least %(limit_value)s minute.",
            "max_value": "A claim lasts at most %(limit_value)s minutes (8 hours).",
        },
    )

    def duration(self) -> timedelta:
        return timedelta(minutes=self.cleaned_data["claim_minutes"])


class ConflictClaimBatchForm(ConflictQueueForm):
    """Claim the next ``size`` open conflicts the queue's filters match that nobody else
    holds (the same limits as for promotion requests)."""

    size = ClaimBatchForm.base_fields["size"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        messages = self.fields["size"].error_messages
        for code, message in messages.items():
            messages[code] = str(message).replace("request", "conflict")
