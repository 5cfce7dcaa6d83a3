"""Derived artifacts: summaries and embeddings, each pointing at every source it came from.

Deleting, redacting or expiring a source removes its embeddings and invalidates every summary
citing it (which loses its text and embedding, says why and by which audit event), in the
same transaction, as the models' ``deletion_rules`` declare (:mod:`apps.core.deletion`).
Re-summarisation is not queued: no summariser is configured, so an invalid summary stays
invalid, visibly so.
"""

from __future__ import annotations

import uuid
from typing import ClassVar

from django.db import models
from pgvector.django import VectorField

from apps.api.models import STORED_RESPONSE
from apps.core import deletion
from apps.records.models import Fact, MemoryRecord, Sensitivity
from apps.tenancy.models import TenantOwned
from apps.work.models import QUEUED_WORK


class Summary(TenantOwned):
    """Text derived from records and episodes. Refused without sources; its sensitivity is the
    highest of its sources'. When a source goes, the summary becomes invalid (and says why),
    loses its embedding and is never retrieved again."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    text = models.TextField()
    reason = models.TextField()
    sensitivity = models.CharField(max_length=16, choices=Sensitivity.choices)
    writer_type = models.CharField(max_length=16)
    writer_id = models.CharField(max_length=64, blank=True)
    writer_label = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField()
    valid = models.BooleanField(default=True)
    invalidated_at = models.DateTimeField(null=True, blank=True)
    invalidated_reason = models.TextField(blank=True)
    invalidated_by = models.UUIDField(
        null=True, blank=True, help_text="The audit event of the change that invalidated it."
    )

    # Withdrawn (a source went): invalid, says when and why (the first time), and by which
    # audit event; its text goes, and with it (their references) its embeddings, queued work
    # and stored responses.
    deletion_rules = deletion.Rules(
        named_by=(STORED_RESPONSE, QUEUED_WORK),
        subject_data=True,
        counted_as="summaries_invalidated",
        withdrawal=deletion.Rewrite(
            values={"valid": False, "text": ""},
            first={"invalidated_at": deletion.NOW, "invalidated_reason": deletion.REASON},
            pending={"valid": True},
            stamp="invalidated_by",
        ),
        unrelated={"invalidated_by": "an audit event (the audit log is never deleted)"},
    )

    class Meta:
        indexes: ClassVar[list[models.Index]] = [
            models.Index(fields=["tenant", "valid", "created_at"], name="summary_tenant_valid"),
        ]

    def __str__(self) -> str:
        return f"summary {self.pk}"

    def source_list(self) -> list[dict[str, str]]:
        """Its sources as the API shows them (prefetch ``sources`` to read them at once)."""
        return [
            {"type": s.source_type, "id": str(s.source_id)}
            for s in sorted(self.sources.all(), key=lambda s: s.pk)
        ]

    def writer(self) -> dict[str, str]:
        return {"type": self.writer_type, "id": self.writer_id, "label": self.writer_label}


class SummarySource(TenantOwned):
    """One pointer from a summary to a source (a record version, or an episode of a run)."""

    id = models.BigAutoField(primary_key=True)
    summary = models.ForeignKey(Summary, on_delete=models.CASCADE, related_name="sources")
    source_type = models.CharField(max_length=16)  # record | episode
    source_id = models.UUIDField()
    # For a record source: its fact, so deleting any version of the fact finds the summary.
    fact = models.ForeignKey(
        Fact, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    # A summary that loses a source (the version or episode it cites, or the fact of a cited
    # version) is withdrawn; the pointer stays, naming what it was made from.
    deletion_rules = deletion.Rules(
        references=(
            deletion.Reference(
                "source_id",
                deletion.Withdraw("summary"),
                kind="source_type",
                to={"record": "records.MemoryRecord", "episode": "state.Episode"},
            ),
            deletion.Reference("fact", deletion.Withdraw("summary")),
        ),
    )

    class Meta:
        indexes: ClassVar[list[models.Index]] = [
            models.Index(fields=["tenant", "source_id"], name="summary_source_id"),
            models.Index(fields=["tenant", "fact"], name="summary_source_fact"),
        ]

    def __str__(self) -> str:
        return f"{self.source_type}:{self.source_id}"


class Embedding(TenantOwned):
    """One vector per (record or summary, model), with the model's name and dimension.

    Stored beside its source in PostgreSQL so a delete removes it in the same transaction.
    The column has no fixed dimension; indexes are per model on a cast to that model's
    dimension (see the migrations).
    """

    id = models.BigAutoField(primary_key=True)
    record = models.ForeignKey(
        MemoryRecord, null=True, blank=True, on_delete=models.CASCADE, related_name="embeddings"
    )
    summary = models.ForeignKey(
        Summary, null=True, blank=True, on_delete=models.CASCADE, related_name="embeddings"
    )
    model = models.CharField(max_length=100)
    dimension = models.PositiveIntegerField()
    vector = VectorField()
    content_digest = models.CharField(max_length=64)
    created_at = models.DateTimeField()
    # The record's scope, written by the database itself (a trigger, migration 0004) whenever
    # the row is written, whatever the caller sent: a record's scope never changes (another
    # scope is another version), so the copy cannot go stale. With it here, a scoped search
    # reads only the vectors of its scope instead of looking each candidate's vector up, and
    # an HNSW scan drops out-of-scope vectors before it visits their records. Empty for a
    # summary's vector.
    scope_domain = models.CharField(max_length=100, blank=True, default="", editable=False)
    scope_task_type = models.CharField(max_length=100, blank=True, default="", editable=False)

    # Derived from its source's content: it goes when the source is withdrawn, as when it is
    # deleted.
    deletion_rules = deletion.Rules(
        counted_as="embeddings",
        references=(
            deletion.Reference("record", deletion.DELETE),
            deletion.Reference("summary", deletion.DELETE),
        ),
    )

    class Meta:
        constraints: ClassVar[list[models.BaseConstraint]] = [
            models.UniqueConstraint(
                fields=["record", "model"],
                condition=models.Q(record__isnull=False),
                name="embedding_once_per_record_model",
            ),
            models.UniqueConstraint(
                fields=["summary", "model"],
                condition=models.Q(summary__isnull=False),
                name="embedding_once_per_summary_model",
            ),
            models.CheckConstraint(
                condition=models.Q(record__isnull=False, summary__isnull=True)
                | models.Q(record__isnull=True, summary__isnull=False),
                name="embedding_has_one_source",
            ),
        ]
        indexes: ClassVar[list[models.Index]] = [
            models.Index(
                fields=["tenant", "model", "scope_domain", "scope_task_type"],
                name="embedding_tenant_model_scope",
            ),
            # The same keys with the vectors in the index, for the models with an HNSW index
            # (their dimension is known, so an entry fits a B-tree page): a scoped exact
            # search reads its scope's vectors from consecutive index pages (an index-only
            # scan) instead of visiting a heap page per vector. It costs a second copy of
            # those vectors on disk; at 1M 384-dimension vectors it was as large as the table.
            *(
                models.Index(
                    fields=["tenant", "model", "scope_domain", "scope_task_type"],
                    include=["record", "vector"],
                    condition=models.Q(model=model),
                    name=name,
                )
                for model, name in (
                    ("hashing-256", "embedding_scope_vec_hashing256"),
                    ("st-all-MiniLM-L6-v2", "embedding_scope_vec_minilm384"),
                    ("client-384", "embedding_scope_vec_client384"),
                )
            ),
        ]

    def __str__(self) -> str:
        return f"{self.model} of {self.record_id or self.summary_id}"
