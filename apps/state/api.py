"""``/api/v1/runs`` and ``/api/v1/obligations``: the state layer's agent API.

Every operation needs the credential's ``state`` action. Views parse input, fetch through
tenant-scoped selectors (another tenant's id is a 404), call one service and serialize. Reads
of state are audited (``state.read``) like its changes.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from apps.api.contract import ContractView, PageQuery
from apps.api.idempotency import idempotent
from apps.api.schema import ProblemSerializer
from apps.core.actors import Actor
from apps.core.errors import NotFound
from apps.core.pagination import CursorPage
from apps.core.problems import PROBLEM_CONTENT_TYPE, problem_body
from apps.tenancy.models import AgentCredential

from . import selectors, services
from .models import Obligation, Run
from .serializers import (
    CancelInput,
    CheckpointInput,
    CheckpointSerializer,
    CommitInput,
    EpisodeInput,
    EpisodeSerializer,
    FailInput,
    ObligationCreateResponse,
    ObligationInput,
    ObligationListQuery,
    ObligationSerializer,
    RunListQuery,
    RunOpenInput,
    RunSerializer,
)


def _credential(request: Request) -> AgentCredential:
    credential = request.auth
    assert isinstance(credential, AgentCredential)
    return credential


def _actor(request: Request) -> Actor:
    return Actor.for_credential(_credential(request))


def _conflict(description: str) -> OpenApiResponse:
    return OpenApiResponse(ProblemSerializer, description=description)


def _run_or_404(run_id: str) -> Run:
    run = selectors.run_get(run_id)
    if run is None:
        raise NotFound("No such run.")
    return run


def _obligation_or_404(obligation_id: str) -> Obligation:
    obligation = selectors.obligation_get(obligation_id)
    if obligation is None:
        raise NotFound("No such obligation.")
    return obligation


class RunPagination(CursorPage):
    ordering = ("-opened_at", "-id")


class EpisodePagination(CursorPage):
    ordering = ("seq",)


class ObligationPagination(CursorPage):
    ordering = ("created_at", "id")


def _paginate(view: Any, request: Request, queryset: Any) -> tuple[CursorPage, Any]:
    """A cursor page of ``queryset`` by the view's paginator (typed ``Any``: serializers
    take it with many=True)."""
    paginator: CursorPage = view.pagination_class()
    page = paginator.paginate_queryset(queryset, request, view=view) or []
    return paginator, list(page)


# --- runs -------------------------------------------------------------------------------------


class RunListCreateView(ContractView):
    """Open a run, or list the tenant's runs (by task, by state): how a restarted agent finds
    the run it was in."""

    required_action = "state"
    query_input = {"GET": RunListQuery}
    body_input = {"POST": RunOpenInput}
    pagination_class = RunPagination

    @extend_schema(responses=RunSerializer(many=True))
    def get(self, request: Request) -> Response:
        task_id = self.params.get("task_id", "")
        state = self.params.get("state", "")
        runs = selectors.runs_list(task_id=task_id, state=state)
        paginator, page = _paginate(self, request, runs)
        services.state_read(
            tenant=_credential(request).tenant_id,
            actor=_actor(request),
            object_type="run",
            data={"list": "runs", "count": len(page), "task_id": task_id, "state": state},
        )
        return paginator.get_paginated_response(RunSerializer(page, many=True).data)

    @extend_schema(responses={201: RunSerializer})
    @idempotent()
    def post(self, request: Request) -> Response:
        run = services.run_open(
            tenant=_credential(request).tenant,
            task_id=self.body["task_id"],
            owner=self.body["owner"],
            subject=self.body.get("subject", ""),
            actor=_actor(request),
        )
        return Response(RunSerializer(run).data, status=201)


class RunDetailView(ContractView):
    required_action = "state"

    @extend_schema(responses=RunSerializer)
    def get(self, request: Request, run_id: str) -> Response:
        run = _run_or_404(run_id)
        services.state_read(
            tenant=run.tenant_id, actor=_actor(request), object_type="run", object_id=str(run.pk)
        )
        return Response(RunSerializer(run).data)


class EpisodeListCreateView(ContractView):
    """A run's traces: append while it is open; they are discarded when it closes."""

    required_action = "state"
    query_input = {"GET": PageQuery}
    body_input = {"POST": EpisodeInput}
    pagination_class = EpisodePagination

    @extend_schema(responses=EpisodeSerializer(many=True))
    def get(self, request: Request, run_id: str) -> Response:
        run = _run_or_404(run_id)
        paginator, page = _paginate(self, request, selectors.episodes_list(run))
        services.state_read(
            tenant=run.tenant_id,
            actor=_actor(request),
            object_type="run",
            object_id=str(run.pk),
            data={"list": "episodes", "count": len(page)},
        )
        return paginator.get_paginated_response(EpisodeSerializer(page, many=True).data)

    @extend_schema(
        responses={
            201: EpisodeSerializer,
            (409, PROBLEM_CONTENT_TYPE): _conflict("The run is closed."),
        },
    )
    @idempotent()
    def post(self, request: Request, run_id: str) -> Response:
        run = _run_or_404(run_id)
        episode = services.episode_append(
            run=run,
            role=self.body["role"],
            content=self.body.get("content", ""),
            content_ref=self.body.get("content_ref", ""),
            actor=_actor(request),
        )
        return Response(EpisodeSerializer(episode).data, status=201)


class CheckpointCreateView(ContractView):
    required_action = "state"
    body_input = {"POST": CheckpointInput}

    @extend_schema(
        responses={
            201: OpenApiResponse(CheckpointSerializer, description="A new checkpoint."),
            200: OpenApiResponse(
                CheckpointSerializer,
                description="The latest step again with the same state: the stored checkpoint.",
            ),
            (409, PROBLEM_CONTENT_TYPE): _conflict(
                "The run is closed; or the step is behind the latest checkpoint, or is the "
                "latest with a different state. The problem names `latest_step`."
            ),
        },
    )
    @idempotent()
    def post(self, request: Request, run_id: str) -> Response:
        run = _run_or_404(run_id)
        outcome = services.checkpoint_write(
            run=run,
            step=self.body["step"],
            state=self.body["state"],
            actor=_actor(request),
        )
        data = CheckpointSerializer(outcome.checkpoint).data
        return Response(data, status=201 if outcome.created else 200)


class CheckpointLatestView(ContractView):
    required_action = "state"

    @extend_schema(
        responses={
            200: CheckpointSerializer,
            (404, PROBLEM_CONTENT_TYPE): OpenApiResponse(
                ProblemSerializer, description="No such run, or it has no checkpoint yet."
            ),
        }
    )
    def get(self, request: Request, run_id: str) -> Response:
        run = _run_or_404(run_id)
        checkpoint = selectors.checkpoint_latest(run)
        services.state_read(
            tenant=run.tenant_id,
            actor=_actor(request),
            object_type="run",
            object_id=str(run.pk),
            data={
                "checkpoint": str(checkpoint.pk) if checkpoint else None,
                "step": checkpoint.step if checkpoint else None,
            },
        )
        if checkpoint is None:
            # Returned, not raised: the audited read must survive (a raise rolls back).
            return Response(
                problem_body(404, "The run has no checkpoint yet.", slug="no-checkpoint"),
                status=404,
                content_type=PROBLEM_CONTENT_TYPE,
            )
        return Response(CheckpointSerializer(checkpoint).data)


class RunCloseView(ContractView):
    required_action = "state"

    @extend_schema(
        responses={
            200: OpenApiResponse(
                RunSerializer,
                description="The closed run (closing a closed run returns it unchanged).",
            )
        },
    )
    @idempotent()
    def post(self, request: Request, run_id: str) -> Response:
        run = _run_or_404(run_id)
        run = services.run_close(run=run, actor=_actor(request))
        return Response(RunSerializer(run).data)


# --- obligations ------------------------------------------------------------------------------


class ObligationListCreateView(ContractView):
    required_action = "state"
    query_input = {"GET": ObligationListQuery}
    body_input = {"POST": ObligationInput}
    pagination_class = ObligationPagination

    @extend_schema(responses=ObligationSerializer(many=True))
    def get(self, request: Request) -> Response:
        task_id = self.params.get("task_id", "")
        state = self.params.get("state", "")
        overdue = self.params.get("overdue")
        obligations = selectors.obligations_list(task_id=task_id, state=state, overdue=overdue)
        paginator, page = _paginate(self, request, obligations)
        services.state_read(
            tenant=_credential(request).tenant_id,
            actor=_actor(request),
            object_type="obligation",
            data={
                "list": "obligations",
                "count": len(page),
                "task_id": task_id,
                "state": state,
                "overdue": overdue,
            },
        )
        return paginator.get_paginated_response(ObligationSerializer(page, many=True).data)

    @extend_schema(
        responses={
            201: OpenApiResponse(ObligationCreateResponse, description="A new obligation."),
            200: OpenApiResponse(
                ObligationCreateResponse,
                description="The key already exists: the existing obligation, unchanged "
                "(`mismatched` names request fields that differ from it).",
            ),
            (409, PROBLEM_CONTENT_TYPE): _conflict(
                "A dependency failed or was cancelled, or waits on one that did: the new "
                "obligation could never commit. `never_committable` names those dependencies "
                "and `causes` the failed or cancelled obligations behind each."
            ),
            (422, PROBLEM_CONTENT_TYPE): OpenApiResponse(
                ProblemSerializer,
                description="`depends_on` names obligations this tenant does not have "
                "(named under `errors` and `unknown`).",
            ),
        },
    )
    @idempotent()
    def post(self, request: Request) -> Response:
        data = self.body
        outcome = services.obligation_create(
            tenant=_credential(request).tenant,
            task_id=data["task_id"],
            kind=data["kind"],
            key=data["key"],
            depends_on=data.get("depends_on", []),
            deadline=data.get("deadline"),
            payload=data.get("payload"),
            subject=data.get("subject", ""),
            actor=_actor(request),
        )
        response = dict(ObligationSerializer(outcome.obligation).data)
        response["mismatched"] = outcome.mismatched
        return Response(response, status=201 if outcome.created else 200)


class ObligationDetailView(ContractView):
    required_action = "state"

    @extend_schema(responses=ObligationSerializer)
    def get(self, request: Request, obligation_id: str) -> Response:
        obligation = _obligation_or_404(obligation_id)
        services.state_read(
            tenant=obligation.tenant_id,
            actor=_actor(request),
            object_type="obligation",
            object_id=str(obligation.pk),
            data={"state": obligation.state},
        )
        return Response(ObligationSerializer(obligation).data)


COMMIT_REFUSED = (
    "Refused, with the obligation's current state in extra members: `obligation`, `state`, "
    "`result`, `committed_at`, `committed_by` (the winner's result when it is already "
    "committed, slug `already-committed`); `pending_dependencies` "
    "([{id, key, state}], slug `dependencies-not-committed`) when its dependencies are not "
    "committed; slug `obligation-not-pending` when it failed or was cancelled."
)


class ObligationCommitView(ContractView):
    required_action = "state"
    body_input = {"POST": CommitInput}

    @extend_schema(
        responses={
            200: OpenApiResponse(
                ObligationSerializer, description="Committed by this request, with its result."
            ),
            (409, PROBLEM_CONTENT_TYPE): _conflict(COMMIT_REFUSED),
        },
    )
    @idempotent()
    def post(self, request: Request, obligation_id: str) -> Response:
        obligation = _obligation_or_404(obligation_id)
        outcome = services.obligation_commit(
            obligation=obligation, result=self.body.get("result"), actor=_actor(request)
        )
        current = ObligationSerializer(outcome.obligation).data
        if outcome.committed:
            return Response(current)
        # Returned, not raised, so the audited refusal is kept (a raise rolls back).
        extra: dict[str, Any] = {
            "obligation": current["id"],
            "state": current["state"],
            "result": current["result"],
            "committed_at": current["committed_at"],
            "committed_by": current["committed_by"],
        }
        if outcome.refusal == "already_committed":
            detail = "The obligation is already committed; its result is in `result`."
            slug = "already-committed"
        elif outcome.refusal == "dependencies":
            pending = outcome.pending_dependencies
            extra["pending_dependencies"] = [
                {"id": str(o.pk), "key": o.key, "state": o.state} for o in pending
            ]
            detail = "Dependencies not committed: " + ", ".join(
                f"{o.pk} ({o.state})" for o in pending
            )
            slug = "dependencies-not-committed"
        else:
            detail = f"The obligation is {outcome.obligation.state}; it cannot be committed."
            slug = "obligation-not-pending"
        return Response(
            problem_body(409, detail, slug=slug, extra=extra),
            status=409,
            content_type=PROBLEM_CONTENT_TYPE,
        )


class ObligationFailView(ContractView):
    """Fail or cancel a pending obligation (final)."""

    required_action = "state"
    transition = "fail"
    body_input = {"POST": FailInput}

    @extend_schema(
        responses={
            200: ObligationSerializer,
            (409, PROBLEM_CONTENT_TYPE): _conflict("The obligation is not pending."),
        },
    )
    @idempotent()
    def post(self, request: Request, obligation_id: str) -> Response:
        obligation = _obligation_or_404(obligation_id)
        reason, actor = self.body.get("reason", ""), _actor(request)
        if self.transition == "cancel":
            ended = services.obligation_cancel(obligation=obligation, reason=reason, actor=actor)
        else:
            result = self.body.get("result")
            ended = services.obligation_fail(
                obligation=obligation, reason=reason, result=result, actor=actor
            )
        return Response(ObligationSerializer(ended).data)


class ObligationCancelView(ObligationFailView):
    transition = "cancel"
    body_input = {"POST": CancelInput}
