"""Console routes of this area, included under ``/console/t/<tenant_slug>/`` in the ``console``
namespace (apps/console/urls.py)."""

from __future__ import annotations

from django.urls import URLPattern, path

from .views import claims, conflicts, decisions, lead

urlpatterns: list[URLPattern] = [
    path("review/", decisions.review_queue, name="review"),
    path("review/bulk-approve/", decisions.review_bulk_approve, name="review-bulk-approve"),
    path("review/selection/", decisions.review_selection, name="review-selection"),
    path("review/claims/", claims.review_claim, name="review-claim"),
    path("review/claims/next/", claims.review_claim_batch, name="review-claim-batch"),
    path("review/claims/release/", claims.review_release_all, name="review-release-all"),
    path("review/arrivals/", claims.review_arrivals, name="review-arrivals"),
    path("review/arrivals/rows/", claims.review_arrival_rows, name="review-arrival-rows"),
    path("review/settings/", lead.review_settings, name="review-settings"),
    path(
        "review/settings/claims/",
        lead.review_claim_duration,
        name="review-claim-duration",
    ),
    path(
        "review/settings/reasons/<uuid:reason_id>/remove/",
        lead.review_reason_remove_view,
        name="review-reason-remove",
    ),
    path(
        "review/settings/reasons/<uuid:reason_id>/up/",
        lead.review_reason_move_view,
        name="review-reason-up",
    ),
    path("review/throughput/", lead.review_throughput_view, name="review-throughput"),
    path("review/<uuid:request_id>/", decisions.review_request, name="review-request"),
    path("review/<uuid:request_id>/approve/", decisions.review_approve, name="review-approve"),
    path("review/<uuid:request_id>/reject/", decisions.review_reject, name="review-reject"),
    path("review/<uuid:request_id>/reverse/", decisions.review_reverse, name="review-reverse"),
    path("conflicts/", conflicts.conflicts, name="conflicts"),
    path("conflicts/claims/", conflicts.conflict_claim, name="conflicts-claim"),
    path("conflicts/claims/next/", conflicts.conflict_claim_batch, name="conflicts-claim-batch"),
    path(
        "conflicts/claims/release/",
        conflicts.conflict_release_all,
        name="conflicts-release-all",
    ),
    path("conflicts/selection/", conflicts.conflict_selection, name="conflicts-selection"),
    path("conflicts/bulk-resolve/", conflicts.conflict_bulk_resolve, name="conflicts-bulk-resolve"),
    path("conflicts/<uuid:conflict_id>/", conflicts.conflict_detail, name="conflict"),
    path(
        "conflicts/<uuid:conflict_id>/resolve/",
        conflicts.conflict_resolve_view,
        name="conflict-resolve",
    ),
]
