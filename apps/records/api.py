"""``/api/v1/records``, ``/facts``, ``/consents``.

Views parse input, fetch through tenant-scoped selectors, call one service and serialize.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from django.db.models import OuterRef, Q, QuerySet, Subquery
from drf_spectacular.utils import (
    OpenApiResponse,
    extend_schema,
)
from rest_framework.request import Request
from rest_framework.response import Response

from apps.api.contract import ContractView, InputRejected
from apps.api.idempotency import idempotent
from apps.api.schema import ProblemSerializer
from apps.audit.services import audit_read, audit_record
from apps.core.actors import Actor
from apps.core.errors import NotFound
from apps.core.pagination import CursorPage
from apps.core.problems import PROBLEM_CONTENT_TYPE, problem_body
from apps.tenancy.models import AgentCredential, Tenant
from apps.tenancy.replicas import replica_read

from . import selectors, services, signals
from .models import (
    Conflict,
    ConflictState,
    MemoryRecord,
    PromotionEvent,
    Sensitivity,
    Trust,
)
from .responses import (
    FactCheckResponse,
    FactsResponse,
    HistoryResponse,
    RecordDetail,
)
from .serializers import (
    VECTOR_FIELD,
    FactCheckInput,
    FactSerializer,
    FactsQuery,
    ObservationSerializer,
    PromotionEventSerializer,
    RecordListQuery,
    RecordSerializer,
    RecordWriteInput,
    RecordWriteResponse,
    VersionSerializer,
    audit_field_names,
)
from .trust import decision_trust_annotate
from .validation import WRITE_REJECTED, WRITE_TOO_LARGE, WriteRejected


def serialize_many(serializer_class: Any, items: Any) -> Any:
    """``serializer_class(items, many=True).data``. (The DRF stubs type a serializer's
    instance as a single object, so ``many=True`` with a list does not type-check.)"""
    return serializer_class(items, many=True).data


def request_actor(request: Request) -> Actor:
    credential = request.auth
    assert isinstance(credential, AgentCredential)
    return Actor.for_credential(credential)


def not_found(what: str) -> NotFound:
    return NotFound(f"No such {what}.")


def with_open_conflict(queryset: QuerySet[MemoryRecord]) -> QuerySet[MemoryRecord]:
    """Annotate each record with the id of an open conflict it takes part in."""
    open_conflicts = Conflict.objects.filter(state=ConflictState.OPEN).filter(
        Q(contender=OuterRef("pk")) | Q(current_record=OuterRef("pk"))
    )
    return queryset.annotate(open_conflict_id=Subquery(open_conflicts.values("pk")[:1]))


def sees_restricted(request: Request) -> bool:
    """Whether the request's credential may read restricted memories (its ``sees_restricted``,
    true unless it was issued without); otherwise they read as missing, like another
    tenant's."""
    credential = request.auth
    return isinstance(credential, AgentCredential) and credential.sees_restricted


def record_or_404(request: Request, record_id: str) -> MemoryRecord:
    # Without its observations: no API answer reads them from the record (the detail
    # queries them in its own order), and a delete or a promotion needs none.
    record = selectors.record_get(
        record_id, sees_restricted=sees_restricted(request), observations=False
    )
    if record is None:
        raise not_found("record")
    return record


class RecordPagination(CursorPage):
    ordering = ("-written_at", "-id")


class RecordListCreateView(ContractView):
    """List the tenant's live records, or write one (the policy boundary)."""

    required_actions = {"GET": "read", "POST": "write"}
    query_input = {"GET": RecordListQuery}
    body_input = {"POST": RecordWriteInput}
    pagination_class = RecordPagination

    def handle_exception(self, exc: Exception) -> Response:
        # A refused write is audited (field names only), and the audit must survive the
        # refusal: answered here, not by the exception handler, which rolls the request back.
        if isinstance(exc, WriteRejected) or (
            isinstance(exc, InputRejected) and exc.where == "body" and exc.errors
        ):
            return self._write_rejected(exc.errors or {}, status=exc.status)
        return super().handle_exception(exc)

    def _write_rejected(self, errors: dict[str, list[str]], *, status: int) -> Response:
        credential = self.request.auth
        assert isinstance(credential, AgentCredential)
        body = record_write_refusal(
            credential=credential, actor=request_actor(self.request), errors=errors, status=status
        )
        return Response(body, status=status, content_type=PROBLEM_CONTENT_TYPE)

    @extend_schema(responses=RecordSerializer(many=True))
    @replica_read()
    def get(self, request: Request) -> Response:
        filters = {name: self.params.get(name, "") for name in selectors.RECORD_FILTERS}
        queryset = with_open_conflict(
            selectors.records_list(filters, sees_restricted=sees_restricted(request))
        )
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(queryset, request, view=self)
        return paginator.get_paginated_response(serialize_many(RecordSerializer, page))

    @extend_schema(
        responses={
            201: RecordWriteResponse,
            200: RecordWriteResponse,
            (422, PROBLEM_CONTENT_TYPE): OpenApiResponse(
                ProblemSerializer,
                description="The write names what this tenant does not have: no open run with "
                "`source.run_id` (retention `session`), or a revoked consent "
                "(`retention.consent_ref`); or its lifetime, counted from `observed_at`, has "
                "already ended (`observed_at` with `retention.ttl`, or with `sensitivity` for "
                "the class's rule). Nothing was stored.",
            ),
        },
    )
    @idempotent()
    def post(self, request: Request) -> Response:
        credential = request.auth
        assert isinstance(credential, AgentCredential)
        status, body = record_write_answer(
            credential=credential,
            actor=request_actor(request),
            data=self.body["record"],
            vector=self.body["vector"],
        )
        return Response(body, status=status)


def record_write_refusal(
    *,
    credential: AgentCredential,
    actor: Actor,
    errors: dict[str, list[str]],
    status: int,
    audit_data: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A refused write, audited as ``record.write_rejected`` (field names only: a member name
    the client invented is counted, not kept), and its problem body. ``audit_data`` adds to
    the event (a batch item's index)."""
    audited = audit_field_names({path: e for path, e in errors.items() if path != VECTOR_FIELD})
    if VECTOR_FIELD in errors:
        audited["fields"] = sorted([*audited["fields"], VECTOR_FIELD])
    audit_record(
        tenant=credential.tenant,
        actor=actor,
        action="record.write_rejected",
        data={**audited, **(audit_data or {})},
    )
    detail = WRITE_TOO_LARGE if status == 413 else WRITE_REJECTED
    return problem_body(status, detail, errors=errors)


def client_vector_store(*, tenant: Tenant, vector: Sequence[float], record: Any) -> None:
    """A write's vector (checked by ``RecordWriteInput``'s ``vector``) stored as its record's
    embedding, by the derivations app (``signals.client_vector_store``)."""
    signals.client_vector_store.results(tenant=tenant, vector=vector, record=record)


def record_write_answer(
    *, credential: AgentCredential, actor: Actor, data: Any, vector: Any
) -> tuple[int, dict[str, Any]]:
    """One validated write, stored, and its answer: ``201`` with the record for a new
    version (or an observation), ``200`` when nothing changed. Raises what ``record_write``
    raises. The single write and each item of a batch (apps/records/batch_api.py) answer so."""
    outcome = services.record_write(tenant=credential.tenant, actor=actor, data=data)
    if vector is not None:
        # In the caller's transaction (the request's, or a batch item's savepoint).
        client_vector_store(tenant=credential.tenant, vector=vector, record=outcome.record)
    return (201 if outcome.created else 200), record_written_body(outcome)


def record_written_body(outcome: services.WriteOutcome) -> dict[str, Any]:
    """A write's answer body: the record, its ``outcome``, ``promotion_request`` and
    ``notices`` (``RecordWriteResponse``)."""
    record = outcome.record
    conflicts = {record.pk: outcome.conflict.pk if outcome.conflict else None}
    if outcome.conflict is None and outcome.outcome != "created":
        # An earlier version of this record may take part in an open conflict; a record
        # created just now cannot.
        record = with_open_conflict(MemoryRecord.objects.filter(pk=record.pk)).get()
        conflicts = {}
    body = dict(RecordSerializer(record, context={"conflicts": conflicts}).data)
    body["outcome"] = outcome.outcome
    body["promotion_request"] = (
        str(outcome.promotion_request.pk) if outcome.promotion_request else None
    )
    body["notices"] = outcome.notices
    return body


class RecordDetailView(ContractView):
    """A record with its provenance, observations, version chain and derived artifacts."""

    # ``/records/{id}`` routes to governance's subclass (apps/governance/api.py), which adds
    # the record's deletion.

    required_actions: ClassVar[dict[str, str]] = {"GET": "read"}
    query_input: ClassVar[dict[str, Any]] = {}

    @extend_schema(responses=RecordDetail)
    @replica_read()
    def get(self, request: Request, record_id: str) -> Response:
        record = record_or_404(request, record_id)
        record = with_open_conflict(MemoryRecord.objects.filter(pk=record.pk)).get()
        body = dict(RecordSerializer(record).data)
        body["observations"] = serialize_many(
            ObservationSerializer, record.observations.order_by("recorded_at")
        )
        body["provenance"] = {
            "source": body["source"],
            "observed_at": body["observed_at"],
            "writer": body["writer"],
            "owner": record.owner,
            "reason": record.reason,
            "observations": len(body["observations"]),
        }
        body["promotion_events"] = serialize_many(
            PromotionEventSerializer,
            PromotionEvent.objects.filter(record=record).order_by("promoted_at"),
        )
        body["versions"] = serialize_many(
            VersionSerializer,
            selectors.record_history(record, sees_restricted=sees_restricted(request)),
        )
        body["derived"] = selectors.derived_artifacts(record)
        return Response(body)


class RecordHistoryView(ContractView):
    """Every version of the record's fact, oldest first, superseded ones included."""

    required_action = "read"

    @extend_schema(responses=HistoryResponse)
    def get(self, request: Request, record_id: str) -> Response:
        record = record_or_404(request, record_id)
        versions = serialize_many(
            VersionSerializer,
            selectors.record_history(record, sees_restricted=sees_restricted(request)),
        )
        return Response({"record": str(record.pk), "versions": versions})


class FactPagination(CursorPage):
    # The order facts always had; the fact's id settles keys written in several scopes.
    ordering = ("key", "scope_domain", "scope_task_type", "fact_id")


class FactsView(ContractView):
    """The current version of each scoped fact of a subject (optionally as of a moment),
    filtered by scope the way search filters; paged like every listing."""

    required_action = "read"
    query_input = {"GET": FactsQuery}
    pagination_class = FactPagination

    @extend_schema(responses=FactsResponse)
    @replica_read(when=lambda view: not view.params.get("fresh"))
    def get(self, request: Request) -> Response:
        subject, as_of = self.params["subject"], self.params.get("as_of")
        scope = selectors.ScopeFilter(
            domain=self.params.get("domain", ""),
            task_type=self.params.get("task_type", ""),
            conditions=self.params.get("conditions"),
        )
        trust = self.params.get("trust", "")
        paginator = self.pagination_class()
        facts = (
            paginator.paginate_queryset(
                selectors.facts_current(
                    subject, as_of, scope, trust, sees_restricted=sees_restricted(request)
                ),
                request,
                view=self,
            )
            or []
        )
        decision_trust_annotate(facts)
        credential = request.auth
        assert isinstance(credential, AgentCredential)
        audit_read(
            tenant=credential.tenant,
            actor=request_actor(request),
            action="facts.read",
            data={
                "subject": subject,
                "scope": {k: v for k, v in vars(scope).items() if v},
                "trust": trust or None,
                "as_of": as_of,
                "returned": [str(fact.pk) for fact in facts],
            },
            restricted=any(fact.sensitivity == Sensitivity.RESTRICTED for fact in facts),
        )
        response = paginator.get_paginated_response(serialize_many(FactSerializer, facts))
        response.data.update({"subject": subject, "as_of": as_of})
        if as_of is not None:
            # What was deleted since is gone; its receipts (ids only) say so.
            response.data["deletions"] = selectors.deletions_covering(subject, as_of)
        return response


class FactCheckView(ContractView):
    """Stale-fact detection: is each (id, version) still current, and if not, why? And is it
    safe to act on?

    ``reason``: ``superseded``, ``expired``, ``redacted``, ``deleted`` (with the
    ``deletion_receipt``), or ``not_current`` (a contender awaiting review, or another
    version than the one named). An id this tenant never held is ``found: false`` and not
    stale, with a ``detail`` saying so.

    ``safe_to_act`` is true when the version is current, in no open conflict and confirmed
    (``"trust": "provisional"`` in the body accepts a provisional one, for a step that can be
    undone); ``unsafe_reasons`` says what stands in the way otherwise."""

    required_action = "read"
    body_input = {"POST": FactCheckInput}

    @extend_schema(responses=FactCheckResponse)
    @idempotent(replay="rerun")
    def post(self, request: Request) -> Response:
        items = [(item["id"], item.get("version")) for item in self.body["facts"]]
        checks = selectors.facts_check(
            items,
            trust=self.body.get("trust") or Trust.CONFIRMED,
            sees_restricted=sees_restricted(request),
        )
        credential = request.auth
        assert isinstance(credential, AgentCredential)
        if getattr(self, "idempotent_replay", None) is None:  # a retry was audited the first time
            audit_read(
                tenant=credential.tenant,
                actor=request_actor(request),
                action="facts.check",
                data={
                    "checked": [str(pk) for pk, _ in items],
                    "found": [check.id for check in checks if check.found],
                },
                restricted=any(check.sensitivity == Sensitivity.RESTRICTED for check in checks),
            )
        answer = {
            "facts": checks,
            "stale": sum(1 for check in checks if check.stale),
            "unsafe": sum(1 for check in checks if not check.safe_to_act),
        }
        return Response(FactCheckResponse(answer).data)
