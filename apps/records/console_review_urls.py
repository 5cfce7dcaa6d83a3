"""Console routes of this area, included under ``/console/t/<tenant_slug>/`` in the ``console``
namespace (apps/tenancy/urls.py)."""

from __future__ import annotations

from django.urls import URLPattern, path

from .views import review, review_claims, review_lead

urlpatterns: list[URLPattern] = [
    path("review/", review.review_queue, name="review"),
    path("review/bulk-approve/", review.review_bulk_approve, name="review-bulk-approve"),
    path("review/selection/", review.review_selection, name="review-selection"),
    path("review/claims/", review_claims.review_claim, name="review-claim"),
    path("review/claims/next/", review_claims.review_claim_batch, name="review-claim-batch"),
    path("review/claims/release/", review_claims.review_release_all, name="review-release-all"),
    path("review/arrivals/", review_claims.review_arrivals, name="review-arrivals"),
    path("review/arrivals/rows/", review_claims.review_arrival_rows, name="review-arrival-rows"),
    path("review/settings/", review_lead.review_settings, name="review-settings"),
    path(
        "review/settings/claims/",
        review_lead.review_claim_duration,
        name="review-claim-duration",
    ),
    path(
        "review/settings/reasons/<uuid:reason_id>/remove/",
        review_lead.review_reason_remove_view,
        name="review-reason-remove",
    ),
    path(
        "review/settings/reasons/<uuid:reason_id>/up/",
        review_lead.review_reason_move_view,
        name="review-reason-up",
    ),
    path("review/throughput/", review_lead.review_throughput_view, name="review-throughput"),
    path("review/<uuid:request_id>/", review.review_request, name="review-request"),
    path("review/<uuid:request_id>/approve/", review.review_approve, name="review-approve"),
    path("review/<uuid:request_id>/reject/", review.review_reject, name="review-reject"),
    path("review/<uuid:request_id>/reverse/", review.review_reverse, name="review-reverse"),
    path("conflicts/", review.conflicts, name="conflicts"),
    path("conflicts/<uuid:conflict_id>/", review.conflict_detail, name="conflict"),
    path(
        "conflicts/<uuid:conflict_id>/resolve/",
        review.conflict_resolve_view,
        name="conflict-resolve",
    ),
]
