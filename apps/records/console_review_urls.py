"""Console routes of this area, included under ``/console/t/<tenant_slug>/`` in the ``console``
namespace (apps/tenancy/urls.py)."""

from __future__ import annotations

from django.urls import URLPattern, path

from .views import review

urlpatterns: list[URLPattern] = [
    path("review/", review.review_queue, name="review"),
    path("review/bulk-approve/", review.review_bulk_approve, name="review-bulk-approve"),
    path("review/selection/", review.review_selection, name="review-selection"),
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
