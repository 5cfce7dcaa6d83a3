"""The state ledger an agent consults to know what it already did: runs and their episodes,
checkpoints, obligations. Actors are ``<role>_type / _id / _label`` triples, stamped by the
server from the credential."""

from __future__ import annotations

import uuid
from typing import ClassVar

from django.contrib.postgres.fields import ArrayField
from django.db import models

from apps.api.models import STORED_RESPONSE
from apps.core import deletion
from apps.tenancy.models import TenantOwned


class RunState(models.TextChoices):
    OPEN = "open"
    CLOSED = "closed"


class Run(TenantOwned):
    """A session of work on ``task_id``. Open until closed; closing discards its episodes and
    expires the session-scoped records written in it. ``last_seq`` numbers its episodes (the
    run row is the lock appends and checkpoints take)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    task_id = models.CharField(max_length=200)
    owner = models.CharField(max_length=200)
    # Whom the run is about, when it is about someone: an erasure of that subject takes it.
    subject = models.CharField(max_length=200, blank=True, default="")
    state = models.CharField(max_length=8, choices=RunState.choices, default=RunState.OPEN)
    opened_at = models.DateTimeField()
    opened_by_type = models.CharField(max_length=16)
    opened_by_id = models.CharField(max_length=64, blank=True)
    opened_by_label = models.CharField(max_length=200, blank=True)
    closed_at = models.DateTimeField(null=True, blank=True)
    closed_by_type = models.CharField(max_length=16, blank=True)
    closed_by_id = models.CharField(max_length=64, blank=True)
    closed_by_label = models.CharField(max_length=200, blank=True)
    last_seq = models.IntegerField(default=0)
    episodes_discarded = models.IntegerField(default=0)
    records_expired = models.IntegerField(default=0)

    deletion_rules = deletion.Rules(
        named_by=(STORED_RESPONSE,),
        subject_data=True,
        counted_as="runs",
        unrelated={"task_id": "the agent's task, as the agent names it"},
    )

    class Meta:
        indexes: ClassVar[list[models.Index]] = [
            models.Index(fields=["tenant", "task_id", "opened_at"], name="run_tenant_task"),
            models.Index(fields=["tenant", "state", "opened_at"], name="run_tenant_state"),
            models.Index(fields=["tenant", "subject"], name="run_tenant_subject"),
            models.Index(fields=["tenant", "owner"], name="run_tenant_owner"),
        ]

    def __str__(self) -> str:
        return f"run {self.pk} of {self.task_id} ({self.state})"


class Episode(TenantOwned):
    """One trace of a run (a turn, a tool output, a document, a partial result): ``content``,
    or ``content_ref`` pointing to it elsewhere. Deleted when the run closes."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # Looked up (and cascaded) through the (tenant, run, seq) constraint's index.
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="episodes", db_index=False)
    seq = models.IntegerField()
    role = models.CharField(max_length=50)
    content = models.TextField(blank=True)
    content_ref = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField()

    deletion_rules = deletion.Rules(
        subject_data=True, counted_as="episodes", named_by=(STORED_RESPONSE,)
    )

    class Meta:
        constraints: ClassVar[list[models.BaseConstraint]] = [
            models.UniqueConstraint(fields=["tenant", "run", "seq"], name="episode_seq_per_run")
        ]

    def __str__(self) -> str:
        return f"episode {self.seq} of {self.run_id}"


class Checkpoint(TenantOwned):
    """A run's state after ``step``. Steps only move forward; one state per step."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # Looked up through the (tenant, run, step) constraint's index.
    run = models.ForeignKey(
        Run, on_delete=models.CASCADE, related_name="checkpoints", db_index=False
    )
    step = models.IntegerField()
    state = models.JSONField()
    state_digest = models.CharField(max_length=64)
    created_at = models.DateTimeField()

    deletion_rules = deletion.Rules(
        subject_data=True, counted_as="checkpoints", named_by=(STORED_RESPONSE,)
    )

    class Meta:
        constraints: ClassVar[list[models.BaseConstraint]] = [
            models.UniqueConstraint(
                fields=["tenant", "run", "step"], name="checkpoint_step_per_run"
            ),
            models.CheckConstraint(condition=models.Q(step__gte=0), name="checkpoint_step_gte_0"),
        ]

    def __str__(self) -> str:
        return f"checkpoint {self.step} of {self.run_id}"


class ObligationState(models.TextChoices):
    PENDING = "pending"
    COMMITTED = "committed"
    FAILED = "failed"
    CANCELLED = "cancelled"


class Obligation(TenantOwned):
    """Work with an external effect, identified by ``key`` (the idempotency key, unique per
    tenant). ``pending`` until committed (exactly once, with its ``result``), failed or
    cancelled; all three are final. ``depends_on``: obligations of the tenant to be committed
    first; they exist at creation and never change, so dependencies form a DAG."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    task_id = models.CharField(max_length=200)
    kind = models.CharField(max_length=100)
    key = models.CharField(max_length=200)
    state = models.CharField(
        max_length=16, choices=ObligationState.choices, default=ObligationState.PENDING
    )
    depends_on = ArrayField(models.UUIDField(), default=list, blank=True)
    deadline = models.DateTimeField(null=True, blank=True)
    payload = models.JSONField(default=dict, blank=True)
    result = models.JSONField(null=True, blank=True)
    subject = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField()
    created_by_type = models.CharField(max_length=16)
    created_by_id = models.CharField(max_length=64, blank=True)
    created_by_label = models.CharField(max_length=200, blank=True)
    committed_at = models.DateTimeField(null=True, blank=True)
    committed_by_type = models.CharField(max_length=16, blank=True)
    committed_by_id = models.CharField(max_length=64, blank=True)
    committed_by_label = models.CharField(max_length=200, blank=True)
    # Failed or cancelled: when, by whom and why.
    ended_at = models.DateTimeField(null=True, blank=True)
    ended_by_type = models.CharField(max_length=16, blank=True)
    ended_by_id = models.CharField(max_length=64, blank=True)
    ended_by_label = models.CharField(max_length=200, blank=True)
    end_reason = models.TextField(blank=True)

    # An erasure withdraws an obligation about (``subject``) or mentioning its subject:
    # payload, result and the subject go, key and state stay (the work is still done once).
    deletion_rules = deletion.Rules(
        named_by=(STORED_RESPONSE,),
        subject_data=True,
        counted_as="obligations_stripped",
        withdrawal=deletion.Rewrite(values={"payload": {}, "result": None, "subject": ""}),
        unrelated={
            "task_id": "the agent's task, as the agent names it",
            "depends_on": "obligations of the same tenant, which an erasure strips, never deletes",
        },
    )

    class Meta:
        constraints: ClassVar[list[models.BaseConstraint]] = [
            models.UniqueConstraint(fields=["tenant", "key"], name="obligation_key_per_tenant")
        ]
        indexes: ClassVar[list[models.Index]] = [
            models.Index(
                fields=["tenant", "task_id", "state", "created_at"], name="obligation_tenant_task"
            ),
            models.Index(fields=["tenant", "state", "deadline"], name="obligation_tenant_deadline"),
            models.Index(fields=["tenant", "created_at"], name="obligation_tenant_created"),
            models.Index(fields=["tenant", "subject"], name="obligation_tenant_subject"),
        ]

    def __str__(self) -> str:
        return f"obligation {self.key} ({self.state})"
