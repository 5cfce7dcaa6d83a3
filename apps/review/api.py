"""``/api/v1/promotion-requests``, ``/conflicts`` and a record's promotion requests: the
review decisions an agent credential with the ``review`` action may take.

Views parse input, fetch through tenant-scoped selectors, call one service and serialize.
"""

from __future__ import annotations

import uuid
from typing import TypeVar

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from apps.api.contract import ContractView
from apps.api.idempotency import idempotent
from apps.api.schema import ProblemSerializer
from apps.core.pagination import CursorPage
from apps.core.problems import PROBLEM_CONTENT_TYPE
from apps.records.api import (
    not_found,
    record_or_404,
    request_actor,
    sees_restricted,
    serialize_many,
)
from apps.records.models import Conflict, PromotionRequest
from apps.records.serializers import (
    ConflictListQuery,
    ConflictResolveInput,
    DecisionInput,
    PromotionListQuery,
    PromotionRequestInput,
)

from . import selectors, services
from .serializers import ConflictSerializer, PromotionRequestSerializer


class PromotionRequestPagination(CursorPage):
    ordering = ("-requested_at", "-id")


class ConflictPagination(CursorPage):
    ordering = ("-opened_at", "-id")


class RecordPromotionRequestView(ContractView):
    """Ask reviewers to confirm a provisional record."""

    required_action = "write"
    body_input = {"POST": PromotionRequestInput}

    @extend_schema(
        responses={
            201: PromotionRequestSerializer,
            (409, PROBLEM_CONTENT_TYPE): OpenApiResponse(
                ProblemSerializer, description="The record is confirmed, or cannot be promoted."
            ),
        },
    )
    @idempotent()
    def post(self, request: Request, record_id: str) -> Response:
        record = record_or_404(request, record_id)
        promotion = services.promotion_request_create(
            record=record,
            actor=request_actor(request),
            evidence=self.body.get("evidence"),
            reason=self.body["reason"],
        )
        return Response(PromotionRequestSerializer(promotion).data, status=201)


class PromotionRequestListView(ContractView):
    required_action = "review"
    query_input = {"GET": PromotionListQuery}
    pagination_class = PromotionRequestPagination

    @extend_schema(responses=PromotionRequestSerializer(many=True))
    def get(self, request: Request) -> Response:
        state = self.params.get("state")
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(
            selectors.promotion_requests(state, sees_restricted=sees_restricted(request)),
            request,
            self,
        )
        return paginator.get_paginated_response(serialize_many(PromotionRequestSerializer, page))


Item = TypeVar("Item", PromotionRequest, Conflict)


def _visible_or_404(visible: QuerySet[Item], item_id: str, noun: str) -> Item:
    try:
        found = visible.filter(pk=uuid.UUID(item_id)).first()
    except ValueError:
        found = None
    if found is None:
        raise not_found(noun)
    return found


class PromotionDecisionView(ContractView):
    required_action = "review"
    body_input = {"POST": DecisionInput}
    decision = "approve"

    @extend_schema(
        responses={
            200: PromotionRequestSerializer,
            (403, PROBLEM_CONTENT_TYPE): OpenApiResponse(
                ProblemSerializer,
                description="The credential wrote the record: it cannot decide on it. Or "
                "(an approval) the tenant's policy reserves promotions to a person: the "
                "problem's `policy` is `promotion_requires_person`, and nothing changed.",
            ),
            (409, PROBLEM_CONTENT_TYPE): OpenApiResponse(
                ProblemSerializer,
                description="The request is already decided (`state`), its record is no "
                "longer active, or a reviewer in the console holds it: a claim, named by "
                "`claimed_by` and `claimed_until`, refuses every other decision until it ends.",
            ),
        },
    )
    @idempotent()
    def post(self, request: Request, request_id: str) -> Response:
        visible = selectors.promotion_requests(None, sees_restricted=sees_restricted(request))
        promotion = _visible_or_404(visible, request_id, "promotion request")
        approve = self.decision == "approve"
        decide = services.promotion_approve if approve else services.promotion_reject
        decide(request=promotion, actor=request_actor(request), reason=self.body["reason"])
        promotion.refresh_from_db()
        return Response(PromotionRequestSerializer(promotion).data)


class PromotionApproveView(PromotionDecisionView):
    decision = "approve"


class PromotionRejectView(PromotionDecisionView):
    decision = "reject"


class ConflictListView(ContractView):
    required_action = "review"
    query_input = {"GET": ConflictListQuery}
    pagination_class = ConflictPagination

    @extend_schema(responses=ConflictSerializer(many=True))
    def get(self, request: Request) -> Response:
        state = self.params.get("state")
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(
            selectors.conflicts(state, sees_restricted=sees_restricted(request)), request, self
        )
        return paginator.get_paginated_response(serialize_many(ConflictSerializer, page))


class ConflictResolveView(ContractView):
    required_action = "review"
    body_input = {"POST": ConflictResolveInput}

    @extend_schema(
        responses={
            200: ConflictSerializer,
            (403, PROBLEM_CONTENT_TYPE): OpenApiResponse(
                ProblemSerializer,
                description="The credential wrote one of the versions: it cannot resolve it.",
            ),
            (409, PROBLEM_CONTENT_TYPE): OpenApiResponse(
                ProblemSerializer,
                description="The conflict is already resolved, or a reviewer in the console "
                "holds it: a claim, named by `claimed_by` and `claimed_until`, refuses every "
                "other resolution until it ends.",
            ),
        },
    )
    @idempotent()
    def post(self, request: Request, conflict_id: str) -> Response:
        visible = selectors.conflicts(None, sees_restricted=sees_restricted(request))
        conflict = _visible_or_404(visible, conflict_id, "conflict")
        services.conflict_resolve(
            conflict=conflict,
            actor=request_actor(request),
            resolution=self.body["resolution"],
            reason=self.body["reason"],
            value=self.body.get("value"),
        )
        conflict = selectors.conflicts(None, sees_restricted=True).get(pk=conflict.pk)
        return Response(ConflictSerializer(conflict).data)
