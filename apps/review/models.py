"""Review's own rows: a reviewer's claim on an open item and the tenant's canned reasons.

Promotion requests, promotion events and conflicts stay in ``apps.records``: the write path
opens them (a contradicting write, a second observation) and a record's trust is read from
them, and records sits below review.
"""

from __future__ import annotations

import uuid
from typing import ClassVar

from django.db import models

from apps.core import deletion
from apps.records.models import Conflict, PromotionRequest
from apps.tenancy.models import TenantOwned


class ReviewClaim(TenantOwned):
    """A reviewer's claim on an open promotion request or an open conflict (exactly one), so
    two reviewers do not work the same item (:mod:`apps.review.claims`). It ends when it
    expires (ignored by every read, never swept), is released, or the item is decided. One row
    per item: a claim taken after the last one lapsed replaces it."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    request = models.OneToOneField(
        PromotionRequest, null=True, blank=True, on_delete=models.CASCADE, related_name="claim"
    )
    conflict = models.OneToOneField(
        Conflict, null=True, blank=True, on_delete=models.CASCADE, related_name="claim"
    )
    # Claims are people's (the console's); an agent credential never holds one.
    holder_id = models.CharField(max_length=64)
    holder_label = models.CharField(max_length=200)
    claimed_at = models.DateTimeField()
    expires_at = models.DateTimeField()

    deletion_rules = deletion.Rules(unrelated={"holder_id": "the person holding the claim"})

    class Meta:
        # The table it was created with, when the model lived in another app.
        db_table = "records_reviewclaim"
        indexes: ClassVar[list[models.Index]] = [
            models.Index(fields=["tenant", "holder_id", "expires_at"], name="claim_tenant_holder")
        ]
        constraints: ClassVar[list[models.BaseConstraint]] = [
            models.CheckConstraint(
                condition=models.Q(request__isnull=False, conflict__isnull=True)
                | models.Q(request__isnull=True, conflict__isnull=False),
                name="review_claim_one_item",
            )
        ]

    def __str__(self) -> str:
        return f"claim on {self.request_id or self.conflict_id} by {self.holder_label}"


class ReasonDecision(models.TextChoices):
    APPROVE = "approve", "Approving"
    REJECT = "reject", "Rejecting"


# Canned reasons of one decision a tenant may define: the number keys 1 to 9 pick them.
REVIEW_REASONS_PER_DECISION = 9


class ReviewReason(TenantOwned):
    """A canned reason for approving or rejecting a promotion request, defined per tenant and
    picked in the queue by its number key. A decision keeps the reason's text, so editing or
    removing a canned reason changes no past decision."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    decision = models.CharField(max_length=16, choices=ReasonDecision.choices)
    text = models.CharField(max_length=300)
    position = models.PositiveSmallIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        # The table it was created with, when the model lived in another app.
        db_table = "records_reviewreason"
        constraints: ClassVar[list[models.BaseConstraint]] = [
            models.UniqueConstraint(
                fields=["tenant", "decision", "text"], name="review_reason_once"
            )
        ]
        indexes: ClassVar[list[models.Index]] = [
            models.Index(fields=["tenant", "decision", "position"], name="review_reason_order")
        ]

    def __str__(self) -> str:
        return f"{self.decision}: {self.text}"
