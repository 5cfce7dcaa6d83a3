"""Console routes of this area, included under ``/console/t/<tenant_slug>/`` in the ``console``
namespace (apps/console/urls.py)."""

from __future__ import annotations

from django.urls import URLPattern, path

from .views import claims, conflicts, decisions, lead

REQUEST = "review/<uuid:request_id>/"
REASON = "review/settings/reasons/<uuid:reason_id>/"
CONFLICT = "conflicts/<uuid:conflict_id>/"

urlpatterns: list[URLPattern] = [
    path(route, view, name=name)
    for route, view, name in (
        ("review/", decisions.review_queue, "review"),
        ("review/bulk-approve/", decisions.review_bulk_approve, "review-bulk-approve"),
        ("review/selection/", decisions.review_selection, "review-selection"),
        ("review/claims/", claims.review_claim, "review-claim"),
        ("review/claims/next/", claims.review_claim_batch, "review-claim-batch"),
        ("review/claims/release/", claims.review_release_all, "review-release-all"),
        ("review/arrivals/", claims.review_arrivals, "review-arrivals"),
        ("review/arrivals/rows/", claims.review_arrival_rows, "review-arrival-rows"),
        ("review/settings/", lead.review_settings, "review-settings"),
        ("review/settings/claims/", lead.review_claim_duration, "review-claim-duration"),
        (f"{REASON}remove/", lead.review_reason_remove_view, "review-reason-remove"),
        (f"{REASON}up/", lead.review_reason_move_view, "review-reason-up"),
        ("review/throughput/", lead.review_throughput_view, "review-throughput"),
        (REQUEST, decisions.review_request, "review-request"),
        (f"{REQUEST}approve/", decisions.review_approve, "review-approve"),
        (f"{REQUEST}reject/", decisions.review_reject, "review-reject"),
        (f"{REQUEST}reverse/", decisions.review_reverse, "review-reverse"),
        ("conflicts/", conflicts.conflicts, "conflicts"),
        ("conflicts/claims/", conflicts.conflict_claim, "conflicts-claim"),
        ("conflicts/claims/next/", conflicts.conflict_claim_batch, "conflicts-claim-batch"),
        ("conflicts/claims/release/", conflicts.conflict_release_all, "conflicts-release-all"),
        ("conflicts/selection/", conflicts.conflict_selection, "conflicts-selection"),
        ("conflicts/bulk-resolve/", conflicts.conflict_bulk_resolve, "conflicts-bulk-resolve"),
        (CONFLICT, conflicts.conflict_detail, "conflict"),
        (f"{CONFLICT}resolve/", conflicts.conflict_resolve_view, "conflict-resolve"),
    )
]
