"""Console forms: they parse and check input; the services make the changes."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth import get_user_model

from .models import DEFAULT_ACTIONS, Action, AuditReads, Membership, Role, Tenant

ACTION_HELP = {
    Action.READ: "read records and facts",
    Action.WRITE: "write records",
    Action.SEARCH: "scoped search",
    Action.DELETE: "delete and redact records",
    Action.REVIEW: "approve promotions, resolve conflicts",
    Action.STATE: "runs, checkpoints and obligations",
    Action.ERASE: "erase by subject, owner or consent",
    Action.AUDIT: "browse the audit log",
}


class CredentialIssueForm(forms.Form):
    """Name, actions and restricted sight of a new agent credential, plus the form's one-time
    nonce."""

    name = forms.CharField(
        max_length=100,
        help_text="Who or what will use it, e.g. “checkout-agent (prod)”.",
        widget=forms.TextInput(attrs={"autocomplete": "off"}),
    )
    actions = forms.MultipleChoiceField(
        choices=[(value, f"{value} — {ACTION_HELP[Action(value)]}") for value in Action.values],
        initial=list(DEFAULT_ACTIONS),
        widget=forms.CheckboxSelectMultiple,
        error_messages={"required": "Choose at least one action."},
        help_text="Grant only what the agent needs.",
    )
    sees_restricted = forms.BooleanField(
        label="Sees restricted memories",
        required=False,
        initial=True,
        help_text="Its reads (records, facts, search, summaries) include memories of the "
        "restricted sensitivity class. Clear it for an agent that must not see them.",
    )
    # Marks one rendering of the form; a second submission of it issues nothing (views.py).
    nonce = forms.CharField(widget=forms.HiddenInput, max_length=64)

    def clean_name(self) -> str:
        name: str = self.cleaned_data["name"].strip()
        if not name:
            raise forms.ValidationError("A credential needs a name.")
        return name


class CredentialRevokeForm(forms.Form):
    """Why a credential is revoked: kept in the audit log with the revocation."""

    reason = forms.CharField(
        max_length=2000,
        label="Reason for revoking",
        error_messages={"required": "Say why you revoke it: the reason is kept in the audit log."},
    )


class MemberAddForm(forms.Form):
    """Add an existing person to the tenant by username."""

    username = forms.CharField(
        max_length=150,
        widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false"}),
        help_text="The person must already have an account.",
    )
    role = forms.ChoiceField(choices=Role.choices, initial=Role.MEMBER)

    def __init__(self, *args: Any, tenant: Tenant, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.tenant = tenant
        self.user: Any = None

    def clean_username(self) -> str:
        username: str = self.cleaned_data["username"].strip()
        user = get_user_model().objects.filter(username=username, is_active=True).first()
        if user is None:
            raise forms.ValidationError(f"There is no active account named “{username}”.")
        if Membership.objects.filter(tenant=self.tenant, user=user).exists():
            raise forms.ValidationError(
                f"{username} is already a member; change their role in the list instead."
            )
        self.user = user
        return username


class MemberRoleForm(forms.Form):
    role = forms.ChoiceField(choices=Role.choices)


class TenantPolicyForm(forms.Form):
    """How the tenant's records are confirmed and which reads of them are audited. The rules
    between the settings are the service's (``tenant_policy_set``)."""

    auto_promote_on_second_observation = forms.BooleanField(
        required=False,
        label="Confirm on a second independent observation",
        help_text="When a second, independent source writes the same value, confirm the "
        "record at once (who confirmed it then reads “observation”) instead of opening a "
        "promotion request for review.",
    )
    promotion_requires_person = forms.BooleanField(
        required=False,
        label="Only a person may confirm a record",
        help_text="Promotion requests are approved by reviewers here in the console; an agent "
        "credential with the review action gets a 403 naming this policy. Off (the default), "
        "such a credential may approve a record it did not write.",
    )
    audit_reads = forms.ChoiceField(
        choices=AuditReads.choices,
        widget=forms.RadioSelect,
        label="Audit reads of memory",
        help_text="Fact reads, fact checks and context searches (the API's and this console's "
        "search) append an audit event naming who read, the filters and the ids returned, "
        "never the content. Decision searches are always audited.",
    )
