"""``GET /api/v1/subjects/{subject}/export``: everything the credential's tenant holds about a
subject, streamed as JSON Lines (:mod:`apps.governance.export`, docs/export.md)."""

from __future__ import annotations

from typing import Any

from django.http import StreamingHttpResponse
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request

from apps.api.contract import IDENTIFIER_CHARS, ContractView
from apps.api.problems import NDJSON, JSONRenderer, NDJSONRenderer
from apps.core.errors import Invalid
from apps.records.validation import SUBJECT_MESSAGE, SUBJECT_RE, identifier_normalised
from apps.tenancy.models import AgentCredential

from .export import LINE_TYPES, SCHEMA, export_stream

EXPORT_DESCRIPTION = (
    f"JSON Lines (`{SCHEMA}`, docs/export.md): a `header` line, then one line per fact (every "
    "version with its provenance, scope, trust and retention), legal hold, run, obligation, "
    "summary citing them, deletion receipt and audit event about them, then an `end` line "
    "with the counts. A stream without its `end` line was cut off. A subject the tenant "
    "holds nothing about gives the header and an `end` line of zero counts."
)


class ExportLineSerializer(serializers.Serializer[dict[str, Any]]):
    """One line of the stream: a JSON object whose ``type`` says what it holds; each type's
    members are those of the API's own answer for it (docs/export.md)."""

    type = serializers.ChoiceField(
        choices=LINE_TYPES,
        help_text="header first, end last; fact, legal_hold, run, obligation, summary, "
        "deletion_receipt and audit_event between, in that order.",
    )
    schema = serializers.CharField(
        required=False, help_text=f"On the header: `{SCHEMA}`, the format's name and version."
    )
    counts = serializers.DictField(
        child=serializers.IntegerField(),
        required=False,
        help_text="On the end line: how many lines of each type (and record versions) came.",
    )


def export_subject(raw: str) -> str:
    """The subject as stored (one spelling, as every API field takes it), or a 400."""
    subject = identifier_normalised(raw)
    if len(subject) > IDENTIFIER_CHARS or not SUBJECT_RE.match(subject):
        problem = SUBJECT_MESSAGE if len(subject) <= IDENTIFIER_CHARS else "At most 200 characters."
        raise Invalid("Invalid path parameter: subject.", errors={"subject": [problem]})
    return subject


class SubjectExportView(ContractView):
    """Everything the tenant holds about a subject, as a stream of JSON Lines.

    Read in one snapshot under the tenant's row-level security: another tenant's data about
    the same subject is never part of it. The answer streams as it is read (no job, however
    much is held)."""

    required_action = "audit"
    # The stream is written by the view; the renderers let a client ask for it by its media
    # type and render errors (problem+json).
    renderer_classes = [NDJSONRenderer, JSONRenderer]

    @extend_schema(
        operation_id="v1_subjects_export",
        parameters=[
            OpenApiParameter(
                "subject",
                # As a write's subject: what a schema-valid client sends is what is accepted.
                {"type": "string", "pattern": SUBJECT_RE.pattern, "maxLength": IDENTIFIER_CHARS},
                OpenApiParameter.PATH,
                description="kind:identifier, e.g. user:8812 (compared case-folded, NFC).",
            )
        ],
        responses={
            (200, NDJSON): OpenApiResponse(ExportLineSerializer, description=EXPORT_DESCRIPTION)
        },
    )
    def get(self, request: Request, subject: str) -> StreamingHttpResponse:
        credential = request.auth
        assert isinstance(credential, AgentCredential)
        stream = export_stream(tenant=credential.tenant, subject=export_subject(subject))
        return StreamingHttpResponse(stream, content_type=NDJSON)
