"""``GET /api/v1/audit-events`` (credentials with the ``audit`` action)."""

from __future__ import annotations

from django.db.models import QuerySet
from django.utils.dateparse import parse_datetime
from rest_framework import generics, serializers
from rest_framework.pagination import CursorPagination

from apps.api.problems import Problem
from apps.tenancy.selectors import parse_uuid

from .models import AuditEvent


class AuditEventSerializer(serializers.ModelSerializer[AuditEvent]):
    actor = serializers.SerializerMethodField()
    object = serializers.SerializerMethodField()

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

    def get_actor(self, event: AuditEvent) -> dict[str, str]:
        return {"type": event.actor_type, "id": event.actor_id, "label": event.actor_label}

    def get_object(self, event: AuditEvent) -> dict[str, str]:
        return {"type": event.object_type, "id": event.object_id}


class AuditPagination(CursorPagination):
    ordering = "-seq"
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500


class AuditEventListView(generics.ListAPIView[AuditEvent]):
    """Audit events of the credential's tenant, newest first.

    Filters: ``record`` (object id), ``action``, ``actor`` (actor id or label), ``since``.
    """

    required_action = "audit"
    serializer_class = AuditEventSerializer
    pagination_class = AuditPagination

    def get_queryset(self) -> QuerySet[AuditEvent]:
        queryset = AuditEvent.objects.all()
        params = self.request.query_params
        errors: dict[str, list[str]] = {}
        if record := params.get("record"):
            queryset = queryset.filter(object_id=record)
        if action := params.get("action"):
            queryset = queryset.filter(action=action)
        if actor := params.get("actor"):
            queryset = queryset.filter(actor_id=actor) | queryset.filter(actor_label=actor)
        if since := params.get("since"):
            moment = parse_datetime(since)
            if moment is None or moment.tzinfo is None:
                errors["since"] = ["an RFC 3339 timestamp with a zone, e.g. 2025-01-14T09:12:00Z"]
            else:
                queryset = queryset.filter(occurred_at__gte=moment)
        if errors:
            raise Problem("Invalid filters.", errors=errors)
        return queryset


class AuditEventDetailView(generics.RetrieveAPIView[AuditEvent]):
    required_action = "audit"
    serializer_class = AuditEventSerializer

    def get_object(self) -> AuditEvent:
        event_id = parse_uuid(self.kwargs["event_id"])
        event = AuditEvent.objects.filter(pk=event_id).first() if event_id else None
        if event is None:
            raise Problem("No such audit event.", status_code=404)
        return event
