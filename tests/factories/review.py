"""Review's rows: claims and canned reasons."""

from __future__ import annotations

from datetime import timedelta

import factory

from apps.review.models import ReviewClaim, ReviewReason

from .base import TenantOwnedFactory, now
from .records import SAME_TENANT, PromotionRequestFactory


class ReviewClaimFactory(TenantOwnedFactory[ReviewClaim]):
    """A reviewer's claim on an open request, lasting half an hour."""

    request = factory.SubFactory(PromotionRequestFactory, tenant=SAME_TENANT)
    holder_id = "1"
    holder_label = "rhea"
    claimed_at = factory.LazyFunction(now)
    expires_at = factory.LazyAttribute(lambda o: o.claimed_at + timedelta(minutes=30))

    class Meta:
        model = ReviewClaim


class ReviewReasonFactory(TenantOwnedFactory[ReviewReason]):
    """A canned reason of one decision, at the next number key."""

    decision = "approve"
    text = factory.Sequence(lambda n: f"Checked against source {n}")
    position = factory.Sequence(lambda n: n % 9 + 1)

    class Meta:
        model = ReviewReason
