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


def _read(request: Request, object_type: str, of: Run | Obligation | None, **data: Any) -> None:
    """Audit the request's read of state: ``of`` one run or obligation, or (None) a list."""
    services.state_read(
        tenant=of.tenant_id if of else _credential(request).tenant_id,
        actor=_actor(request),
        object_type=object_type,
        object_id=str(of.pk) if of else "",
        data=data,
    )


def _problem(description: str) -> OpenApiResponse:
    return OpenApiResponse(ProblemSerializer, description=description)


def _problem_response(status: int, detail: str, **kwargs: Any) -> Response:
    """A problem returned, not raised: the audited read or refusal must survive (a raise
    rolls the request's transaction back)."""
    body = problem_body(status, detail, **kwargs)
    return Response(body, status=status, content_type=PROBLEM_CONTENT_TYPE)


def _run_or_404(run_id: str) -> Run:
    if (run := selectors.run_get(run_id)) is None:
        raise NotFound("No such run.")
    return run


def _obligation_or_404(obligation_id: str) -> Obligation:
    if (obligation := selectors.obligation_get(obligation_id)) is None:
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


class StateView(ContractView):
    # No docstring: the schema describes each operation by its own view's (or ContractView's).
    required_action = "state"


# --- runs -------------------------------------------------------------------------------------


class RunListCreateView(StateView):
    """Open a run, or list the tenant's runs (by task, by state): how a restarted agent finds
    the run it was in."""

    query_input = {"GET": RunListQuery}
    body_input = {"POST": RunOpenInput}
    pagination_class = RunPagination

    @extend_schema(responses=RunSerializer(many=True))
    def get(self, request: Request) -> Response:
        task_id = self.params.get("task_id", "")
        state = self.params.get("state", "")
        runs = selectors.runs_list(task_id=task_id, state=state)
        paginator, page = _paginate(self, request, runs)
        _read(request, "run", None, list="runs", count=len(page), task_id=task_id, state=state)
        return paginator.get_paginated_response(RunSerializer(page, many=True).data)

    @extend_schema(responses={201: RunSerializer})
    @idempotent()
    def post(self, request: Request) -> Response:
        # The validated body's members are the service's arguments, by name.
        run = services.run_open(
            tenant=_credential(request).tenant, actor=_actor(request), **self.body
        )
        return Response(RunSerializer(run).data, status=201)


class RunDetailView(StateView):
    @extend_schema(responses=RunSerializer)
    def get(self, request: Request, run_id: str) -> Response:
        run = _run_or_404(run_id)
        _read(request, "run", run)
        return Response(RunSerializer(run).data)


class EpisodeListCreateView(StateView):
    """A run's traces: append while it is open; they are discarded when it closes."""

    query_input = {"GET": PageQuery}
    body_input = {"POST": EpisodeInput}
    pagination_class = EpisodePagination

    @extend_schema(responses=EpisodeSerializer(many=True))
    def get(self, request: Request, run_id: str) -> Response:
        run = _run_or_404(run_id)
        paginator, page = _paginate(self, request, selectors.episodes_list(run))
        _read(request, "run", run, list="episodes", count=len(page))
        return paginator.get_paginated_response(EpisodeSerializer(page, many=True).data)

    @extend_schema(
        responses={
            201: EpisodeSerializer,
            (409, PROBLEM_CONTENT_TYPE): _problem("The run is closed."),
        },
    )
    @idempotent()
    def post(self, request: Request, run_id: str) -> Response:
        run = _run_or_404(run_id)
        episode = services.episode_append(run=run, actor=_actor(request), **self.body)
        return Response(EpisodeSerializer(episode).data, status=201)


class CheckpointCreateView(StateView):
    body_input = {"POST": CheckpointInput}

    @extend_schema(
        responses={
            201: OpenApiResponse(CheckpointSerializer, description="A new checkpoint."),
            200: OpenApiResponse(
                CheckpointSerializer,
                description="The latest step again with the same state: the stored checkpoint.",
            ),
            (409, PROBLEM_CONTENT_TYPE): _problem(
                "The run is closed; or the step is behind the latest checkpoint, or is the "
                "latest with a different state. The problem names `latest_step`."
            ),
        },
    )
    @idempotent()
    def post(self, request: Request, run_id: str) -> Response:
        run = _run_or_404(run_id)
        outcome = services.checkpoint_write(run=run, actor=_actor(request), **self.body)
        data = CheckpointSerializer(outcome.checkpoint).data
        return Response(data, status=201 if outcome.created else 200)


class CheckpointLatestView(StateView):
    @extend_schema(
        responses={
            200: CheckpointSerializer,
            (404, PROBLEM_CONTENT_TYPE): _problem("No such run, or it has no checkpoint yet."),
        }
    )
    def get(self, request: Request, run_id: str) -> Response:
        run = _run_or_404(run_id)
        checkpoint = selectors.checkpoint_latest(run)
        _read(
            request,
            "run",
            run,
            checkpoint=str(checkpoint.pk) if checkpoint else None,
            step=checkpoint.step if checkpoint else None,
        )
        if checkpoint is None:
            return _problem_response(404, "The run has no checkpoint yet.", slug="no-checkpoint")
        return Response(CheckpointSerializer(checkpoint).data)


class RunCloseView(StateView):
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


class ObligationListCreateView(StateView):
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
        data = {"task_id": task_id, "state": state, "overdue": overdue}
        _read(request, "obligation", None, list="obligations", count=len(page), **data)
        return paginator.get_paginated_response(ObligationSerializer(page, many=True).data)

    @extend_schema(
        responses={
            201: OpenApiResponse(ObligationCreateResponse, description="A new obligation."),
            200: OpenApiResponse(
                ObligationCreateResponse,
                description="The key already exists: the existing obligation, unchanged "
                "(`mismatched` names request fields that differ from it).",
            ),
            (409, PROBLEM_CONTENT_TYPE): _problem(
                "A dependency failed or was cancelled, or waits on one that did: the new "
                "obligation could never commit. `never_committable` names those dependencies "
                "and `causes` the failed or cancelled obligations behind each."
            ),
            (422, PROBLEM_CONTENT_TYPE): _problem(
                "`depends_on` names obligations this tenant does not have (named under `errors` "
                "and `unknown`)."
            ),
        },
    )
    @idempotent()
    def post(self, request: Request) -> Response:
        outcome = services.obligation_create(
            tenant=_credential(request).tenant, actor=_actor(request), **self.body
        )
        response = dict(ObligationSerializer(outcome.obligation).data)
        response["mismatched"] = outcome.mismatched
        return Response(response, status=201 if outcome.created else 200)


class ObligationDetailView(StateView):
    @extend_schema(responses=ObligationSerializer)
    def get(self, request: Request, obligation_id: str) -> Response:
        obligation = _obligation_or_404(obligation_id)
        _read(request, "obligation", obligation, state=obligation.state)
        return Response(ObligationSerializer(obligation).data)


COMMIT_REFUSED = (
    "Refused, with the obligation's current state in extra members: `obligation`, `state`, "
    "`result`, `committed_at`, `committed_by` (the winner's result when it is already "
    "committed, slug `already-committed`); `pending_dependencies` "
    "([{id, key, state}], slug `dependencies-not-committed`) when its dependencies are not "
    "committed; slug `obligation-not-pending` when it failed or was cancelled."
)


class ObligationCommitView(StateView):
    body_input = {"POST": CommitInput}

    @extend_schema(
        responses={
            200: OpenApiResponse(
                ObligationSerializer, description="Committed by this request, with its result."
            ),
            (409, PROBLEM_CONTENT_TYPE): _problem(COMMIT_REFUSED),
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
        shown = ("state", "result", "committed_at", "committed_by")
        extra: dict[str, Any] = {"obligation": current["id"], **{n: current[n] for n in shown}}
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
        return _problem_response(409, detail, slug=slug, extra=extra)


class ObligationFailView(StateView):
    """Fail or cancel a pending obligation (final)."""

    transition = "fail"
    body_input = {"POST": FailInput}

    @extend_schema(
        responses={
            200: ObligationSerializer,
            (409, PROBLEM_CONTENT_TYPE): _problem("The obligation is not pending."),
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
