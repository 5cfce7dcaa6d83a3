"""The governance API: erasures (run in the request or as a job), deletion receipts, and
consent revocation."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from django.conf import settings
from django.urls import reverse
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    PolymorphicProxySerializer,
    extend_schema,
)
from rest_framework.request import Request
from rest_framework.response import Response

from apps.api.contract import (
    IDENTIFIER_CHARS,
    REASON_CHARS,
    ContractView,
    InputRejected,
    PageQuery,
    StrictBooleanField,
    StrictCharField,
    StrictChoiceField,
    StrictSerializer,
    StrictUUIDField,
)
from apps.api.idempotency import idempotent
from apps.api.schema import ProblemSerializer
from apps.core.errors import NotFound
from apps.core.pagination import CursorPage
from apps.core.problems import PROBLEM_CONTENT_TYPE
from apps.derivations import selectors
from apps.derivations.responses import (
    ErasurePreviewSerializer,
    ErasureResultSerializer,
    ReceiptDetailSerializer,
    ReceiptSerializer,
)
from apps.governance.models import ErasureJob, ErasureJobState
from apps.governance.responses import ErasureJobSerializer
from apps.records import purge as record_purge
from apps.records.api import RecordDetailView, record_or_404, request_actor
from apps.records.responses import (
    ConsentRevocationSerializer,
    DeletionPreviewSerializer,
    DeletionReceiptSerializer,
)
from apps.records.serializers import (
    IdentifierField,
    RecordDeleteInput,
    RecordDeleteQuery,
    actor_columns,
)
from apps.records.validation import CONSENT_REF_RE
from apps.tenancy.models import AgentCredential

from . import services as governance_services
from .erasure import (
    SELECTORS,
    ErasurePreview,
    erasure_preview,
    erasure_records_matching,
    erasure_run,
)
from .erasure_jobs import erasure_job_enqueue, erasure_job_get
from .forms import RECEIPT_KINDS
from .preview import DeletionPreview, deletion_preview


# ``/records/{id}``: reading the record is the records app's, its deletion (or the dry run of
# it) governance's. The docstring is the operations' description in the schema.
class RecordView(RecordDetailView):
    """A record with its provenance, observations, version chain and derived artifacts."""

    required_actions = {**RecordDetailView.required_actions, "DELETE": "delete"}
    query_input = {**RecordDetailView.query_input, "DELETE": RecordDeleteQuery}
    body_input = {**RecordDetailView.body_input, "DELETE": RecordDeleteInput}

    @extend_schema(
        responses={
            200: PolymorphicProxySerializer(
                "DeletionOutcome",
                serializers=[DeletionReceiptSerializer, DeletionPreviewSerializer],
                resource_type_field_name=None,
                many=False,
            ),
            (409, PROBLEM_CONTENT_TYPE): OpenApiResponse(
                ProblemSerializer, description="A legal hold keeps the record."
            ),
        },
    )
    def delete(self, request: Request, record_id: str) -> Response:
        if "reason" in self.params and "reason" in self.body:
            raise InputRejected(
                {"reason": ["Give the reason once: in the body or as ?reason=, not both."]},
                where="body",
                too_large=False,
            )
        record = record_or_404(request, record_id)
        if self.params.get("dry_run"):
            return Response(deletion_preview_body(deletion_preview(record)))
        reason = self.body.get("reason") or self.params.get("reason") or DEFAULT_DELETE_REASON
        result = record_purge.record_delete(
            record=record, actor=request_actor(request), reason=reason
        )
        return Response(DeletionReceiptSerializer(result.receipt).data)


DEFAULT_DELETE_REASON = "deleted through the API"


class ErasureInput(StrictSerializer):
    """Exactly one of ``subject``, ``owner`` or ``consent_ref``, and a reason."""

    # Spelt as the write path stores them (apps.records.validation.identifier_normalised).
    subject = IdentifierField(required=False, max_length=IDENTIFIER_CHARS)
    owner = IdentifierField(required=False, max_length=IDENTIFIER_CHARS)
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
        if sum(data.get(name) not in (None, "") for name in SELECTORS) == 1:
            return {}
        return {name: ["Give exactly one of subject, owner or consent_ref."] for name in SELECTORS}

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        selector = next(name for name in SELECTORS if attrs.get(name))
        return {
            "selector": selector,
            "value": attrs[selector],
            "reason": attrs["reason"],
            "dry_run": attrs.get("dry_run", False),
        }


class ConsentRevokeInput(StrictSerializer):
    """Revoking a consent cannot be undone: it says why, and ``force`` revokes a reference no
    record of the tenant was written under (so no write may cite it from now on)."""

    reason = StrictCharField(max_length=REASON_CHARS, help_text="Why; kept in the audit.")
    force = StrictBooleanField(
        required=False,
        help_text="A JSON boolean. true: revoke the reference even though no record of the "
        "tenant was written under it (a misspelt reference is otherwise refused with a 422).",
    )


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
    """Erase everything matching a subject, an owner or a consent, with propagation: for a
    subject or an owner, its runs (episodes, checkpoints) too, and for a subject every
    episode and checkpoint mentioning it; obligations about or mentioning the subject lose
    payload, result and subject (key and state stay)."""

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

        credential = request.auth
        assert isinstance(credential, AgentCredential)
        selector, value, reason = self.body["selector"], self.body["value"], self.body["reason"]
        if self.body["dry_run"]:
            return Response(erasure_preview_body(erasure_preview(selector=selector, value=value)))
        matched = erasure_records_matching(selector=selector, value=value)
        actor = request_actor(request)
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
        return Response(ErasureResultSerializer(result).data)


def erasure_job_body(job: ErasureJob) -> dict[str, Any]:
    """An erasure job: its state and progress; once done, its totals and summary receipt."""
    return {
        "id": str(job.pk),
        "url": reverse("api-erasure", kwargs={"job_id": job.pk}),
        "state": job.state,
        "selector": job.selector,
        "reason": job.reason,
        "requested_by": actor_columns(job, "requested_by"),
        "requested_at": job.requested_at,
        "started_at": job.started_at,
        "finished_at": job.finished_at,
        "progress": {"records_matched": job.records_matched, "records_erased": job.records_erased},
        "totals": job.totals if job.state == ErasureJobState.DONE else None,
        "receipt": ReceiptSerializer(job.receipt).data if job.receipt is not None else None,
        "error": job.error or None,
    }


class ErasureJobView(ContractView):
    """An erasure job of the credential's tenant (asked for through the API or the console)."""

    # Either action reads it: the eraser follows its job, an auditor the deletion history.
    required_action = ("erase", "audit")

    @extend_schema(responses=ErasureJobSerializer)
    def get(self, request: Request, job_id: str) -> Response:
        job = erasure_job_get(job_id)
        if job is None:
            raise NotFound("No such erasure job.")
        return Response(erasure_job_body(job))


class ReceiptPagination(CursorPage):
    ordering = ("-deleted_at", "-id")


class DeletionReceiptQuery(PageQuery):
    parent = StrictUUIDField(  # type: ignore[assignment]
        required=False, help_text="An erasure's receipt: its per-fact ones."
    )
    kind = StrictChoiceField(choices=list(RECEIPT_KINDS), required=False)


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
        return paginator.get_paginated_response(ReceiptSerializer(page or [], many=True).data)


class DeletionReceiptDetailView(ContractView):
    required_action = "audit"

    @extend_schema(responses=ReceiptDetailSerializer)
    def get(self, request: Request, receipt_id: str) -> Response:
        receipt = selectors.receipt_get(receipt_id)
        if receipt is None:
            raise NotFound("No such deletion receipt.")
        return Response(ReceiptDetailSerializer(receipt).data)


class ConsentRevokeView(ContractView):
    """Revoke a consent: everything written under it expires at once, and no write may cite it
    again. It cannot be undone: a reason is required, and a reference no record of the tenant
    was written under is refused (422) unless ``force`` is true."""

    required_action = "erase"
    body_input = {"POST": ConsentRevokeInput}

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "consent_ref",
                {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": IDENTIFIER_CHARS,
                    "pattern": CONSENT_REF_RE.pattern,
                },
                OpenApiParameter.PATH,
                description="The consent reference records were written under: one identifier "
                "of 1 to 200 characters, matched exactly (no space, control character, quote, "
                "bracket or separator; a URL holding NUL is refused whole).",
            )
        ],
        responses={
            200: ConsentRevocationSerializer,
            (422, PROBLEM_CONTENT_TYPE): OpenApiResponse(
                ProblemSerializer,
                description="No record of the tenant was written under the reference and "
                "`force` is not true: nothing was revoked.",
            ),
        },
    )
    @idempotent(resource_id=lambda response: "")
    def post(self, request: Request, consent_ref: str) -> Response:
        credential = request.auth
        assert isinstance(credential, AgentCredential)
        # The service refuses an invalid reference.
        revocation = governance_services.consent_revoke(
            tenant=credential.tenant,
            consent_ref=consent_ref,
            actor=request_actor(request),
            reason=self.body["reason"],
            force=self.body.get("force", False),
        )
        return Response(ConsentRevocationSerializer(revocation).data)
