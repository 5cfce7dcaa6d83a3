"""``/api/v1/summaries``: views parse input, fetch through selectors, call one service."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from django.conf import settings
from django.db import transaction
from django.urls import reverse
from drf_spectacular.utils import (
    OpenApiResponse,
    PolymorphicProxySerializer,
    extend_schema,
)
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from apps.api.contract import (
    IDENTIFIER_CHARS,
    REASON_CHARS,
    ContractView,
    PageQuery,
    StrictBooleanField,
    StrictCharField,
    StrictChoiceField,
    StrictSerializer,
    StrictUUIDField,
)
from apps.api.idempotency import idempotent
from apps.api.schema import ProblemSerializer
from apps.core.actors import Actor
from apps.core.errors import DomainError, NotFound
from apps.core.pagination import CursorPage
from apps.core.problems import PROBLEM_CONTENT_TYPE
from apps.records.serializers import VectorField
from apps.tenancy.models import AgentCredential

from . import selectors, services
from .embeddings import client_vector_store
from .models import ErasureJob, ErasureJobState, Summary
from .preview import DeletionPreview
from .responses import (
    ErasureJobSerializer,
    ErasurePreviewSerializer,
    ErasureResultSerializer,
    ReceiptDetailSerializer,
    ReceiptSerializer,
    RedactResponse,
    SummarySerializer,
)
from .services import MAX_SOURCES, MAX_SUMMARY_CHARS

if TYPE_CHECKING:
    from .erasure import ErasurePreview


class SummarySourceInput(StrictSerializer):
    type = StrictChoiceField(
        choices=["record", "episode"],
        error_messages={"invalid_choice": "unknown source type"},
        help_text="record or episode",
    )
    id = StrictUUIDField()


class SummaryInput(StrictSerializer):
    """A summary with a pointer to each of its sources (at least one)."""

    text = StrictCharField(
        max_length=MAX_SUMMARY_CHARS,
        too_large=True,
        help_text=f"At most {MAX_SUMMARY_CHARS} characters (413 over it).",
    )
    sources = SummarySourceInput(many=True, min_length=1, max_length=MAX_SOURCES)  # type: ignore[call-arg]
    reason = StrictCharField(max_length=REASON_CHARS)
    vector = VectorField(
        required=False,
        allow_null=True,
        help_text="Only for a tenant whose embedding model is client-<dim>: the summary's "
        "vector, exactly <dim> numbers usable as pgvector's 32-bit floats (each finite as a "
        "float32, the squared length neither 0 nor overflowing; a vector of length 1 always "
        "passes), stored as its embedding with the "
        "summary (a 400 naming `vector` otherwise). Refused when the tenant's model computes "
        "vectors itself.",
    )


def _actor(request: Request) -> Actor:
    credential = request.auth
    assert isinstance(credential, AgentCredential)
    return Actor.for_credential(credential)


def rejected_problem(rejected: services.DerivationRejected) -> DomainError:
    """``rejected`` as the problem the erasure view raises (the exception handler maps every
    :class:`~apps.core.errors.DomainError`; the erasure view moves to apps.governance)."""
    return rejected


def summary_representation(summary: Summary) -> dict[str, Any]:
    """A summary as the API shows it. An invalid summary's text is gone with its source; so
    is the text of one citing a record that has expired (expiry is a read-time predicate: the
    sweep that invalidates the summary may not have run yet)."""
    expired_at = selectors.summary_source_expired_at(summary) if summary.valid else None
    valid = summary.valid and expired_at is None
    invalidated: dict[str, Any] | None = None
    if expired_at is not None:
        invalidated = {"at": expired_at, "reason": "a source expired", "by_event": None}
    elif not summary.valid:
        invalidated = {
            "at": summary.invalidated_at,
            "reason": summary.invalidated_reason,
            "by_event": str(summary.invalidated_by) if summary.invalidated_by else None,
        }
    return {
        "id": str(summary.pk),
        "text": summary.text if valid else None,
        "reason": summary.reason,
        "sensitivity": summary.sensitivity,
        "sources": [
            {"type": s.source_type, "id": str(s.source_id)}
            for s in sorted(summary.sources.all(), key=lambda s: s.pk)
        ],
        "writer": {
            "type": summary.writer_type,
            "id": summary.writer_id,
            "label": summary.writer_label,
        },
        "created_at": summary.created_at,
        "valid": valid,
        "invalidated": invalidated,
        "embeddings": [
            {"model": e.model, "dimension": e.dimension, "created_at": e.created_at}
            for e in summary.embeddings.only("model", "dimension", "created_at")
        ],
    }


class SummaryCreateView(ContractView):
    """Store a summary with a pointer to each of its sources (refused without any)."""

    required_action = "write"
    body_input = {"POST": SummaryInput}

    @extend_schema(
        responses={
            201: SummarySerializer,
            (422, PROBLEM_CONTENT_TYPE): OpenApiResponse(
                ProblemSerializer,
                description="A source is not a live record or episode of this tenant (each "
                "named under `errors`).",
            ),
        },
    )
    @idempotent()
    def post(self, request: Request) -> Response:
        credential = request.auth
        assert isinstance(credential, AgentCredential)
        vector = self.body.get("vector")
        # The summary and its vector commit together, or neither does.
        with transaction.atomic():
            summary = services.summary_create(
                tenant=credential.tenant,
                actor=_actor(request),
                text=self.body["text"],
                sources=[dict(source) for source in self.body["sources"]],
                reason=self.body["reason"],
            )
            if vector is not None:
                client_vector_store(tenant=credential.tenant, vector=vector, summary=summary)
        return Response(summary_representation(summary), status=201)


class SummaryDetailView(ContractView):
    """A summary, valid or not; an invalid one says why and by which audit event."""

    required_action = "read"

    @extend_schema(responses=SummarySerializer)
    def get(self, request: Request, summary_id: str) -> Response:
        summary = selectors.summary_get(summary_id)
        if summary is None:
            raise NotFound("No such summary.")
        return Response(summary_representation(summary))


class RedactInput(StrictSerializer):
    fields = serializers.ListField(  # type: ignore[assignment]
        child=StrictCharField(max_length=IDENTIFIER_CHARS, allow_blank=True),
        min_length=1,
        max_length=100,
        help_text="Dotted paths into the value (card.number, items.0; empty or value: the "
        "whole value).",
    )
    reason = StrictCharField(max_length=REASON_CHARS)


class RecordRedactView(ContractView):
    """Rewrite named parts of a record to a marker; derived artifacts follow."""

    required_action = "delete"
    body_input = {"POST": RedactInput}

    @extend_schema(
        responses={
            200: RedactResponse,
            (409, PROBLEM_CONTENT_TYPE): OpenApiResponse(
                ProblemSerializer, description="A legal hold keeps the record as it is."
            ),
            (422, PROBLEM_CONTENT_TYPE): OpenApiResponse(
                ProblemSerializer,
                description="A field names no part of the record's value (each named under "
                "`errors`).",
            ),
        },
    )
    @idempotent()
    def post(self, request: Request, record_id: str) -> Response:
        from apps.records import api as records_api
        from apps.records.models import MemoryRecord
        from apps.records.selectors import record_get
        from apps.records.serializers import RecordSerializer

        record = record_get(record_id)
        if record is None:
            raise NotFound("No such record.")
        result = services.record_redact(
            record=record,
            actor=_actor(request),
            fields=self.body["fields"],
            reason=self.body["reason"],
        )
        stored = records_api.with_open_conflict(
            MemoryRecord.objects.filter(pk=result.record.pk)
        ).get()
        body = dict(RecordSerializer(stored).data)
        body["redaction_result"] = {
            "fields": [f or "value" for f in result.fields],
            "counts": result.counts,
        }
        return Response(body)


class ErasureInput(StrictSerializer):
    """Exactly one of ``subject``, ``owner`` or ``consent_ref``, and a reason."""

    subject = StrictCharField(required=False, max_length=IDENTIFIER_CHARS)
    owner = StrictCharField(required=False, max_length=IDENTIFIER_CHARS)
    consent_ref = StrictCharField(required=False, max_length=IDENTIFIER_CHARS)
    reason = StrictCharField(max_length=REASON_CHARS)
    dry_run = StrictBooleanField(
        required=False,
        help_text="A JSON boolean (true or false, never a string). true: the totals and ids the "
        "erasure would remove now; nothing is changed and no receipt is written.",
    )

    schema_rules: ClassVar[dict[str, Any]] = {
        "oneOf": [
            {"required": [name], "properties": {name: {"type": "string"}}}
            for name in ("subject", "owner", "consent_ref")
        ]
    }

    def cross_field_errors(self, data: Mapping[str, Any]) -> dict[str, list[str]]:
        from .erasure import SELECTORS

        given = [name for name in SELECTORS if data.get(name) not in (None, "")]
        if len(given) != 1:
            return {
                name: ["Give exactly one of subject, owner or consent_ref."] for name in SELECTORS
            }
        return {}

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        from .erasure import SELECTORS

        selector = next(name for name in SELECTORS if attrs.get(name))
        return {
            "selector": selector,
            "value": attrs[selector],
            "reason": attrs["reason"],
            "dry_run": attrs.get("dry_run", False),
        }


def deletion_preview_body(preview: DeletionPreview) -> dict[str, Any]:
    """A deletion's dry run as the API shows it: counts, and the ids of what would go."""
    return {
        "dry_run": True,
        "record": str(preview.record_id) if preview.record_id else None,
        "fact": str(preview.fact_id) if preview.fact_id else None,
        "held": preview.held,
        "holds": [str(hold.pk) for hold in preview.holds],
        "counts": preview.counts(),
        "record_ids": [str(version.pk) for version in preview.versions],
        "summaries_invalidated": [str(s.pk) for s in preview.summaries_to_invalidate],
        "open_promotion_requests": [str(r.pk) for r in preview.open_promotion_requests],
        "open_conflicts": [str(c.pk) for c in preview.open_conflicts],
    }


def erasure_preview_body(preview: ErasurePreview) -> dict[str, Any]:
    """An erasure's dry run: the totals it would report, and the ids of what would go."""
    removal = preview.removal
    return {
        "dry_run": True,
        "totals": preview.totals(),
        "fact_ids": [str(pk) for pk in removal.fact_ids],
        "record_ids": [str(version.pk) for version in removal.versions],
        "summaries_invalidated": [str(s.pk) for s in removal.summaries_to_invalidate],
        "ids_truncated": removal.facts > len(removal.fact_ids)
        or removal.version_count > len(removal.versions)
        or removal.summaries_to_invalidate_count > len(removal.summaries_to_invalidate),
    }


class ErasureView(ContractView):
    """Erase everything matching a subject, an owner or a consent, with propagation."""

    required_action = "erase"
    body_input = {"POST": ErasureInput}

    @extend_schema(
        responses={
            200: OpenApiResponse(
                PolymorphicProxySerializer(
                    "ErasureOutcome",
                    serializers=[ErasureResultSerializer, ErasurePreviewSerializer],
                    resource_type_field_name=None,
                    many=False,
                ),
                description="The erasure, done; or with `dry_run: true`, what it would remove.",
            ),
            202: OpenApiResponse(
                ErasureJobSerializer,
                description="More records than ERASURE_JOB_THRESHOLD_RECORDS match: the "
                "erasure is a job; its URL is in Location and in `url`.",
            ),
        },
    )
    @idempotent()
    def post(self, request: Request) -> Response:
        from .erasure import erasure_preview, erasure_records_matching, erasure_run
        from .erasure_jobs import erasure_job_enqueue

        credential = request.auth
        assert isinstance(credential, AgentCredential)
        selector, value, reason = self.body["selector"], self.body["value"], self.body["reason"]
        if self.body["dry_run"]:
            return Response(erasure_preview_body(erasure_preview(selector=selector, value=value)))
        matched = erasure_records_matching(selector=selector, value=value)
        actor = _actor(request)
        if matched > settings.ERASURE_JOB_THRESHOLD_RECORDS:
            job = erasure_job_enqueue(
                tenant=credential.tenant,
                actor=actor,
                selector=selector,
                value=value,
                reason=reason,
                records=matched,
            )
            body = erasure_job_body(job)
            return Response(body, status=202, headers={"Location": body["url"]})
        result = erasure_run(
            tenant=credential.tenant, actor=actor, selector=selector, value=value, reason=reason
        )
        return Response(
            {
                "id": str(result.receipt.pk),
                "receipt": receipt_body(result.receipt),
                "totals": result.totals,
                "receipts": result.receipt_ids,
                "receipts_truncated": result.totals.get("facts", 0) > len(result.receipt_ids),
            }
        )


def erasure_job_body(job: ErasureJob) -> dict[str, Any]:
    """An erasure job: its state and progress; once done, its totals and summary receipt."""
    return {
        "id": str(job.pk),
        "url": reverse("api-erasure", kwargs={"job_id": job.pk}),
        "state": job.state,
        "selector": job.selector,
        "reason": job.reason,
        "requested_by": {
            "type": job.requested_by_type,
            "id": job.requested_by_id,
            "label": job.requested_by_label,
        },
        "requested_at": job.requested_at,
        "started_at": job.started_at,
        "finished_at": job.finished_at,
        "progress": {"records_matched": job.records_matched, "records_erased": job.records_erased},
        "totals": job.totals if job.state == ErasureJobState.DONE else None,
        "receipt": receipt_body(job.receipt) if job.receipt is not None else None,
        "error": job.error or None,
    }


class ErasureJobView(ContractView):
    """An erasure job of the credential's tenant (asked for through the API or the console)."""

    # Either action reads it: the eraser follows its job, an auditor the deletion history.
    required_action = ("erase", "audit")

    @extend_schema(responses=ErasureJobSerializer)
    def get(self, request: Request, job_id: str) -> Response:
        from .erasure_jobs import erasure_job_get

        job = erasure_job_get(job_id)
        if job is None:
            raise NotFound("No such erasure job.")
        return Response(erasure_job_body(job))


def receipt_body(receipt: Any) -> dict[str, Any]:
    from apps.records.api import receipt_representation

    body = receipt_representation(receipt)
    body["parent"] = str(receipt.parent_id) if receipt.parent_id else None
    return body


class ReceiptPagination(CursorPage):
    ordering = ("-deleted_at", "-id")
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500


RECEIPT_KINDS = ["record", "erasure", "expiry"]


class DeletionReceiptQuery(PageQuery):
    parent = StrictUUIDField(  # type: ignore[assignment]
        required=False, help_text="An erasure's receipt: its per-fact ones."
    )
    kind = StrictChoiceField(choices=RECEIPT_KINDS, required=False)


class DeletionReceiptListView(ContractView):
    """Deletion receipts, newest first (``?parent=<id>`` lists an erasure's receipts)."""

    required_action = "audit"
    query_input = {"GET": DeletionReceiptQuery}
    pagination_class = ReceiptPagination

    @extend_schema(operation_id="v1_deletion_receipts_list", responses=ReceiptSerializer(many=True))
    def get(self, request: Request) -> Response:
        parent = self.params.get("parent")
        queryset = selectors.receipts(
            parent=str(parent) if parent else "", kind=self.params.get("kind", "")
        )
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(queryset, request, view=self)
        return paginator.get_paginated_response([receipt_body(r) for r in page or []])


class DeletionReceiptDetailView(ContractView):
    required_action = "audit"

    @extend_schema(responses=ReceiptDetailSerializer)
    def get(self, request: Request, receipt_id: str) -> Response:
        receipt = selectors.receipt_get(receipt_id)
        if receipt is None:
            raise NotFound("No such deletion receipt.")
        body = receipt_body(receipt)
        body["children"] = receipt.children.count()
        return Response(body)
