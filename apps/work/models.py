"""The outbox: work to do after a commit, one row per piece of work (``apps.work.outbox``)."""

from __future__ import annotations

import uuid
from typing import ClassVar

from django.db import models

from apps.core import deletion
from apps.tenancy.models import TenantOwned

#: What a model whose rows queued work may be about declares (``Rules.named_by``): the outbox
#: sits below the apps whose rows it names and knows none of them.
QUEUED_WORK = "work.OutboxMessage.object_id"


class OutboxState(models.TextChoices):
    PENDING = "pending", "pending"
    PUBLISHED = "published", "published"
    DONE = "done", "done"
    DEAD = "dead", "dead"


class OutboxMessage(TenantOwned):
    """Work to do after a commit, written in the same transaction as the change that wants it.

    A relay (``apps.work.outbox``) publishes pending rows to Celery, so a crash between
    commit and publish loses nothing. ``payload`` holds ids only, never memory content (broker
    messages must not carry personal data). ``object_id`` is the record or summary the work is
    about, so a deletion can drop its pending work and ``verify-erasure`` can look for it.

    Embedding rows are themselves the unit of work: the worker claims a batch of them
    (``FOR UPDATE SKIP LOCKED``), embeds the batch and marks it done in one transaction; their
    broker messages are wake-ups only (``apps.derivations.embeddings.embeddings_drain``).
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    task_name = models.CharField(max_length=100)
    payload = models.JSONField(default=dict)
    object_id = models.UUIDField(null=True, blank=True)
    state = models.CharField(
        max_length=16, choices=OutboxState.choices, default=OutboxState.PENDING
    )
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField()
    published_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Not to be taken before this time: a failed attempt backs off, and a row whose source was
    # locked by another transaction waits a moment instead of being claimed again at once.
    available_at = models.DateTimeField(null=True, blank=True)

    # Work about a row that went (or was withdrawn) has nothing left to do. The models it may
    # name declare it (named_by=QUEUED_WORK): a record version, a summary, an erasure job, an
    # evaluation run.
    deletion_rules = deletion.Rules(
        counted_as="outbox",
        references=(deletion.Reference("object_id", deletion.DELETE, to=deletion.DECLARED),),
    )

    class Meta:
        # The table it was created with, in the derivations app (moved: migrations 0001).
        db_table = "derivations_outboxmessage"
        indexes: ClassVar[list[models.Index]] = [
            models.Index(fields=["tenant", "state", "created_at"], name="outbox_tenant_state"),
            models.Index(fields=["tenant", "object_id"], name="outbox_tenant_object"),
        ]

    def __str__(self) -> str:
        return f"{self.task_name} {self.object_id} ({self.state})"
