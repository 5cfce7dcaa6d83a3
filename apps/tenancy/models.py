"""Tenants, the people in them, and the credentials their agents use."""

from __future__ import annotations

import hashlib
import uuid
from datetime import timedelta
from typing import ClassVar

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models


class AuditReads(models.TextChoices):
    """Which reads of memory (fact reads, fact checks, context searches) are audited. A
    decision search is audited whatever this says."""

    OFF = "off", "none"
    RESTRICTED = "restricted", "those that return a restricted memory"
    ALL = "all", "every read"


class Tenant(models.Model):
    """An isolated memory space. Every tenant table carries its id, enforced by RLS.

    Per-tenant object permissions (django-guardian) are granted on this object.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    slug = models.SlugField(max_length=63, unique=True)
    name = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)
    auto_promote_on_second_observation = models.BooleanField(
        default=False,
        help_text="Confirm a record at once when an independent source observes the same "
        "value, instead of opening a promotion request for review.",
    )
    promotion_requires_person = models.BooleanField(
        default=False,
        help_text="Only a person (a reviewer in the console) may confirm a record: an agent "
        "credential's approval is refused, and a second observation opens a promotion request "
        "instead of confirming at once.",
    )
    audit_reads = models.CharField(
        max_length=16,
        choices=AuditReads.choices,
        default=AuditReads.RESTRICTED,
        help_text="Which fact reads, fact checks and context searches are audited (who, the "
        "filters, the ids returned; never content). Decision searches are always audited.",
    )
    embedding_model = models.CharField(
        max_length=100,
        default="e5-small",
        help_text="e5-small (semantic, multilingual, built in), hashing-<dim> (lexical, "
        "built in), st-<model> (the [ml] extra) or client-<dim> (agents send vectors). "
        "Changing it needs `memoryconsole reembed`.",
    )
    run_idle_close_after = models.DurationField(
        default=timedelta(days=7),
        help_text="A run with no episode, checkpoint or other activity for this long is closed "
        "by the idle-run sweep, with the effects of an agent's close.",
    )
    review_claim_duration = models.DurationField(
        default=timedelta(minutes=30),
        help_text="How long a reviewer's claim on promotion requests lasts before others may "
        "take them (claiming again renews it).",
    )
    # Set, and never cleared, when the tenant's first summary is written: while it is false,
    # search plans no summary branch (the branch costs planning time on every search).
    summaries_written = models.BooleanField(default=False, editable=False)

    class Meta:
        ordering = ["slug"]
        constraints: ClassVar[list[models.BaseConstraint]] = [
            models.CheckConstraint(
                condition=models.Q(run_idle_close_after__gt=timedelta(0)),
                name="tenant_run_idle_close_after_positive",
            ),
            models.CheckConstraint(
                condition=models.Q(review_claim_duration__gt=timedelta(0)),
                name="tenant_review_claim_duration_positive",
            ),
        ]
        permissions = [
            ("view_memories", "View the tenant's memories"),
            ("delete_memories", "Delete and redact the tenant's memories"),
            ("erase_memories", "Erase by subject, owner or consent across the tenant"),
            ("review_promotions", "Approve or reject promotion requests"),
            ("resolve_conflicts", "Resolve conflicts between versions"),
            ("view_audit", "Browse the audit log and deletion receipts"),
            ("manage_credentials", "Issue and revoke agent credentials"),
            ("manage_members", "Manage memberships and roles"),
            ("manage_retention", "Edit retention rules and legal holds"),
            ("run_evaluations", "Run evaluations of the memory in a sandbox"),
            ("manage_review", "Lead the review: canned reasons, claims, reviewers' throughput"),
            ("view_restricted", "See memories of the restricted sensitivity class"),
        ]

    def __str__(self) -> str:
        return self.slug


class TenantOwned(models.Model):
    """Base for every tenant table: ``tenant_id NOT NULL`` and, by migration, RLS.

    Indexes on tenant tables lead with ``tenant_id`` (the distribution column if the data
    ever moves to Citus).
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+")

    class Meta:
        abstract = True


class Role(models.TextChoices):
    ADMIN = "admin", "Admin"
    REVIEWER = "reviewer", "Reviewer"
    MEMBER = "member", "Member"
    AUDITOR = "auditor", "Auditor"


class Membership(TenantOwned):
    """A person's role in a tenant; the role maps to guardian permissions on the tenant."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=16, choices=Role.choices)
    # Restricted memories, granted to a member or auditor beyond their role (admins and
    # reviewers see them by role).
    sees_restricted = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints: ClassVar[list[models.BaseConstraint]] = [
            models.UniqueConstraint(fields=["tenant", "user"], name="membership_unique_per_tenant")
        ]

    def __str__(self) -> str:
        return f"{self.user_id} in {self.tenant_id} as {self.role}"


class Action(models.TextChoices):
    """What an agent credential may do (API.md)."""

    READ = "read", "read"
    WRITE = "write", "write"
    SEARCH = "search", "search"
    DELETE = "delete", "delete"
    REVIEW = "review", "review"
    STATE = "state", "state"
    ERASE = "erase", "erase"
    AUDIT = "audit", "audit"


DEFAULT_ACTIONS: tuple[str, ...] = ("read", "write", "search", "state")


TOKEN_PREFIX = "mc_"  # noqa: S105 - a public prefix, not a secret


def hash_token(token: str) -> str:
    """What :class:`AgentCredential` stores of ``token`` (``token_hash``) and looks it up by."""
    return hashlib.sha256(token.encode()).hexdigest()


class AgentCredential(TenantOwned):
    """A bearer token for one tenant's agent. Only a SHA-256 of the token is stored.

    The token is shown once, at issue. Tokens are 256 random bits, so a fast hash is
    enough: there is nothing to brute-force.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=100)
    token_hash = models.CharField(max_length=64, unique=True)
    token_prefix = models.CharField(max_length=12, help_text="First characters, to recognise it")
    actions = ArrayField(models.CharField(max_length=16, choices=Action.choices))
    # Whether its reads (records, facts, search, summaries) include memories of the restricted
    # class. An agent credential is the tenant's own service, so it does unless an admin issues
    # a narrower one (``create-token --no-restricted``, the console's checkbox).
    sees_restricted = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        indexes: ClassVar[list[models.Index]] = [
            models.Index(fields=["tenant", "created_at"], name="credential_tenant_created")
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.token_prefix}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    def allows(self, action: str) -> bool:
        return self.revoked_at is None and action in self.actions
