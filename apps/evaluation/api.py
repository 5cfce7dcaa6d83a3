"""``/api/v1/evaluation/``: decisions at risk, and the tenant's evaluation runs (``audit``).

Input serializer -> selector -> representation. Another tenant's run is a ``404``, the same
as a missing one; a filter naming another tenant's memory or credential finds nothing.
"""

from __future__ import annotations

import re
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.api.contract import (
    ContractMixin,
    PageQuery,
    StrictChoiceField,
    StrictUUIDField,
    TimestampField,
)
from apps.api.schema import PageLinkField
from apps.core.errors import Invalid, NotFound
from apps.core.pagination import PAGE_SIZE_DEFAULT, TOKEN_MAX_LENGTH, Cursor, CursorPage

from .models import EvaluationRun
from .selectors import (
    CHANGE_KINDS,
    AtRiskFilters,
    DecisionAtRisk,
    decisions_at_risk_page,
    evaluation_run_get,
    evaluation_runs,
)


class DecisionsAtRiskFilters(PageQuery):
    change = StrictChoiceField(
        choices=CHANGE_KINDS, required=False, help_text="Only decisions whose memory changed so."
    )
    credential = StrictUUIDField(
        required=False, help_text="Only searches made with this credential (its id)."
    )
    memory = StrictUUIDField(required=False, help_text="Only decisions that relied on it.")
    since = TimestampField(required=False, help_text="Searches at or after (RFC 3339).")
    until = TimestampField(required=False, help_text="Searches before (RFC 3339).")


def _filters(data: dict[str, Any]) -> tuple[AtRiskFilters, Cursor | None, int]:
    after = None
    if "cursor" in data:
        raw = data["cursor"]
        after = Cursor.parse(raw) if len(raw) <= TOKEN_MAX_LENGTH else None
        if after is None or not after.position:
            raise Invalid(
                "Invalid query parameter: cursor.",
                errors={"cursor": ["Not a cursor this API issued; follow the next link."]},
            )
    filters = AtRiskFilters(
        change=data.get("change", ""),
        credential=str(data["credential"]) if data.get("credential") else "",
        memory=data.get("memory"),
        since=data.get("since"),
        until=data.get("until"),
    )
    return filters, after, data.get("page_size", PAGE_SIZE_DEFAULT)


def decision_at_risk_body(item: DecisionAtRisk) -> dict[str, Any]:
    actor: dict[str, Any] = {"id": item.actor_id, "label": item.actor_label}
    return {
        "search_event": str(item.event_id),
        "searched_at": item.searched_at,
        "credential": actor if item.actor_type == "credential" else None,
        "actor": {"type": item.actor_type, **actor},
        "memory": {
            "id": str(item.memory_id),
            # Gone with the memory once it is deleted: the receipt says what went.
            "subject": item.subject or None,
            "key": item.key or None,
        },
        "changes": [{"kind": c.kind, "at": c.at, **c.detail} for c in item.changes],
    }


class _Actor(serializers.Serializer[Any]):
    type = serializers.CharField()
    id = serializers.CharField()
    label = serializers.CharField()  # type: ignore[assignment]


class _Credential(serializers.Serializer[Any]):
    id = serializers.CharField()
    label = serializers.CharField()  # type: ignore[assignment]


class _Memory(serializers.Serializer[Any]):
    id = serializers.UUIDField()
    subject = serializers.CharField(allow_null=True)
    key = serializers.CharField(allow_null=True)


class _Change(serializers.Serializer[Any]):
    kind = serializers.ChoiceField(choices=CHANGE_KINDS)
    at = serializers.DateTimeField(allow_null=True)


class DecisionAtRiskSerializer(serializers.Serializer[Any]):
    search_event = serializers.UUIDField()
    searched_at = serializers.DateTimeField()
    credential = _Credential(allow_null=True)
    actor = _Actor()
    memory = _Memory()
    changes = _Change(
        many=True,
        help_text="Each change after the search, oldest first, with "
        "what names it (superseded_by, audit_event, receipt, conflict, ...).",
    )


class DecisionAtRiskPage(serializers.Serializer[Any]):
    next = PageLinkField()
    previous = PageLinkField(
        help_text="Always null: the listing pages forward from its newest search."
    )
    results = DecisionAtRiskSerializer(many=True)


class _Progress(serializers.Serializer[Any]):
    phase = serializers.CharField()
    done = serializers.IntegerField()
    total = serializers.IntegerField()


class EvaluationRunSerializer(serializers.Serializer[Any]):
    id = serializers.UUIDField()
    state = serializers.CharField()
    scenario_set = serializers.CharField(
        help_text="The scenario set's name (never a path on the server)."
    )
    scenario_digest = serializers.CharField()
    against_cache = serializers.BooleanField()
    requested_by = _Actor()
    requested_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    progress = _Progress()
    passed = serializers.BooleanField(allow_null=True)
    error = serializers.CharField(allow_null=True)


class EvaluationRunDetailSerializer(EvaluationRunSerializer):
    results = serializers.JSONField(help_text="What `memoryconsole evaluate --json` writes.")


class EvaluationRunPagination(CursorPage):
    ordering = ("-requested_at", "-id")


class DecisionsAtRiskView(ContractMixin, APIView):
    """Past ``purpose=decision`` searches that returned a memory which has changed since.

    One item per (search, returned memory) with every change after the search, oldest
    first: ``superseded`` (``superseded_by``), ``redacted`` (``audit_event``), ``deleted``
    (``receipt``, ``receipt_kind``), ``expired`` (``expires_at``, or the expiry ``receipt``),
    ``in_conflict`` (``conflict``), ``unconfirmed`` (``audit_event``). Newest search first;
    ``next`` pages on (a keyset cursor: the same cost at any depth).
    """

    required_action = "audit"
    query_input = {"GET": DecisionsAtRiskFilters}

    @extend_schema(operation_id="v1_evaluation_decisions_at_risk", responses=DecisionAtRiskPage)
    def get(self, request: Request) -> Response:
        filters, after, size = _filters(self.params)
        items = decisions_at_risk_page(filters=filters, after=after, limit=size + 1)
        following = None
        if len(items) > size:
            items = items[:size]
            query = request.query_params.copy()
            query["cursor"] = items[-1].cursor.token()
            # Relative, as every listing's links are (apps.core.pagination.CursorPage).
            following = f"{request.path}?{query.urlencode()}"
        return Response(
            {
                "next": following,
                "previous": None,
                "results": [decision_at_risk_body(item) for item in items],
            }
        )


def scenario_set_name(stored: str) -> str:
    """The scenario set's name as the API shows it. Runs started with ``memoryconsole
    evaluate --tenant`` used to store the set's path on the server, which the API does not
    show: of such a run, the file's name without its directory or ``.json``."""
    return re.split(r"[\\/]", stored)[-1].removesuffix(".json")


def run_body(run: EvaluationRun, *, full: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": str(run.pk),
        "state": run.state,
        "scenario_set": scenario_set_name(run.scenario_set),
        "scenario_digest": run.scenario_digest,
        "against_cache": run.against_cache,
        "requested_by": {
            "type": run.requested_by_type,
            "id": run.requested_by_id,
            "label": run.requested_by_label,
        },
        "requested_at": run.requested_at,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "progress": {
            "phase": run.progress_phase,
            "done": run.progress_done,
            "total": run.progress_total,
        },
        "passed": run.passed,
        "error": run.error or None,
    }
    if full:
        body["results"] = run.results
    return body


class EvaluationRunListView(ContractMixin, APIView):
    """The tenant's evaluation runs (without their figures), newest first."""

    required_action = "audit"
    query_input = {"GET": PageQuery}
    pagination_class = EvaluationRunPagination

    @extend_schema(
        operation_id="v1_evaluation_runs_list", responses=EvaluationRunSerializer(many=True)
    )
    def get(self, request: Request) -> Response:
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(evaluation_runs(), request, view=self) or []
        return paginator.get_paginated_response([run_body(run) for run in page])


class EvaluationRunDetailView(ContractMixin, APIView):
    """One run with its figures (``results``: what ``memoryconsole evaluate --json`` writes)."""

    required_action = "audit"

    @extend_schema(
        parameters=[OpenApiParameter("run_id", OpenApiTypes.UUID, OpenApiParameter.PATH)],
        responses=EvaluationRunDetailSerializer,
    )
    def get(self, request: Request, run_id: str) -> Response:
        run = evaluation_run_get(run_id)
        if run is None:
            raise NotFound("No such evaluation run.")
        return Response(run_body(run, full=True))
