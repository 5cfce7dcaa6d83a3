"""``GET /api/v1/audit-events`` and ``/{id}`` (credentials with the ``audit`` action)."""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, serializers

from apps.audit.models import AuditEvent
from apps.core.errors import NotFound
from apps.core.pagination import CursorPage
from apps.tenancy.selectors import parse_uuid

from .contract import (
    IDENTIFIER_CHARS,
    ContractMixin,
    PageQuery,
    StrictCharField,
    TimestampField,
)


class AuditActorSerializer(serializers.Serializer[AuditEvent]):
    type = serializers.CharField(source="actor_type", help_text="user, credential or system")
    id = serializers.CharField(
        source="actor_id", help_text="user or credential id; empty for system"
    )

    def get_fields(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
        # ``label`` cannot be a class attribute: it would shadow Field.label.
        fields = super().get_fields()
        fields["label"] = serializers.CharField(source="actor_label")
        return fields


class AuditObjectSerializer(serializers.Serializer[AuditEvent]):
    type = serializers.CharField(source="object_type")
    id = serializers.CharField(source="object_id")


class AuditEventSerializer(serializers.ModelSerializer[AuditEvent]):
    actor = AuditActorSerializer(source="*", read_only=True)
    object = AuditObjectSerializer(source="*", read_only=True)

    class Meta:
        model = AuditEvent
        fields = (
            "id",
            "seq",
            "occurred_at",
            "action",
            "actor",
            "object",
            "digest",
            "data",
            "prev_hash",
            "hash",
        )
        read_only_fields = fields


class AuditEventQuery(PageQuery):
    """The list's query parameters."""

    record = StrictCharField(
        required=False,
        max_length=IDENTIFIER_CHARS,
        help_text="Id of the object the event is about.",
    )
    action = StrictCharField(
        required=False, max_length=IDENTIFIER_CHARS, help_text="e.g. credential.issue"
    )
    actor = StrictCharField(
        required=False, max_length=IDENTIFIER_CHARS, help_text="The actor's id or label."
    )
    since = TimestampField(
        required=False, help_text="Events at or after this time (RFC 3339, with a zone)."
    )


class AuditPagination(CursorPage):
    ordering = "-seq"


class AuditEventListView(ContractMixin, generics.ListAPIView[AuditEvent]):
    """Audit events of the credential's tenant, newest first (cursor-paginated).

    Filters: ``record`` (object id), ``action``, ``actor`` (actor id or label), ``since``.
    """

    required_action = "audit"
    serializer_class = AuditEventSerializer
    pagination_class = AuditPagination
    query_input = {"GET": AuditEventQuery}

    def get_queryset(self) -> QuerySet[AuditEvent]:
        params: dict[str, Any] = self.params
        queryset = AuditEvent.objects.all()
        if record := params.get("record"):
            queryset = queryset.filter(object_id=record)
        if action := params.get("action"):
            queryset = queryset.filter(action=action)
        if actor := params.get("actor"):
            queryset = queryset.filter(Q(actor_id=actor) | Q(actor_label=actor))
        if (since := params.get("since")) is not None:
            queryset = queryset.filter(occurred_at__gte=since)
        return queryset


@extend_schema(parameters=[OpenApiParameter("event_id", OpenApiTypes.UUID, OpenApiParameter.PATH)])
class AuditEventDetailView(ContractMixin, generics.RetrieveAPIView[AuditEvent]):
    """One audit event of the credential's tenant.

    Another tenant's event, a missing one and a malformed id all get the same ``404``.
    """

    required_action = "audit"
    serializer_class = AuditEventSerializer

    def get_object(self) -> AuditEvent:
        event_id = parse_uuid(self.kwargs["event_id"])
        event = AuditEvent.objects.filter(pk=event_id).first() if event_id else None
        if event is None:
            raise NotFound("No such audit event.")
        return event
