"""``/api/v1/summaries``: views parse input, fetch through selectors, call one service."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from drf_spectacular.utils import (
    OpenApiResponse,
    extend_schema,
)
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from apps.api.contract import (
    IDENTIFIER_CHARS,
    REASON_CHARS,
    ContractView,
    StrictCharField,
    StrictChoiceField,
    StrictSerializer,
    StrictUUIDField,
)
from apps.api.idempotency import idempotent
from apps.api.schema import ProblemSerializer
from apps.core.errors import NotFound
from apps.core.problems import PROBLEM_CONTENT_TYPE
from apps.records import api as records_api
from apps.records.models import MemoryRecord, Sensitivity
from apps.records.selectors import record_get
from apps.records.serializers import RecordSerializer, VectorField
from apps.tenancy.models import AgentCredential

from . import selectors, services
from .embeddings import client_vector_store
from .models import Summary
from .responses import (
    RedactResponse,
    SummarySerializer,
)
from .services import MAX_SOURCES, MAX_SUMMARY_CHARS


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
        "sources": summary.source_list(),
        "writer": summary.writer(),
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
                actor=records_api.request_actor(request),
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
        # A summary of a restricted record is restricted (it inherits the highest class).
        if summary is None or (
            summary.sensitivity == Sensitivity.RESTRICTED
            and not records_api.sees_restricted(request)
        ):
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
        record = record_get(record_id, sees_restricted=records_api.sees_restricted(request))
        if record is None:
            raise NotFound("No such record.")
        result = services.record_redact(
            record=record,
            actor=records_api.request_actor(request),
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
