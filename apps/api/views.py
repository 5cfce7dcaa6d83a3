"""Platform endpoints of the API: health and the calling credential."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import connection
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.decorators import api_view, authentication_classes, permission_classes
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memoryconsole.celery import broker_status

from .problems import PROBLEM_CONTENT_TYPE, problem_body


@extend_schema(
    auth=[],
    responses={
        200: inline_serializer(
            "Health",
            {
                "database": serializers.CharField(),
                "vector": serializers.CharField(),
                "broker": serializers.CharField(),
            },
        )
    },
)
@api_view(["GET"])
@authentication_classes([])
@permission_classes([AllowAny])
def health(request: Request) -> Response:
    """Liveness of the database, the pgvector extension and the task broker. No auth."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            row = cursor.fetchone()
    except Exception:
        return Response(
            problem_body(503, "The database is unreachable."),
            status=503,
            content_type=PROBLEM_CONTENT_TYPE,
        )
    if row is None:
        return Response(
            problem_body(503, "The database lacks the 'vector' extension (pgvector)."),
            status=503,
            content_type=PROBLEM_CONTENT_TYPE,
        )
    return Response({"database": "ok", "vector": row[0], "broker": broker_status()})


class MeView(APIView):
    """The credential making the request: its tenant, name and actions."""

    @extend_schema(
        responses=inline_serializer(
            "Credential",
            {
                "id": serializers.UUIDField(),
                "name": serializers.CharField(),
                "tenant": serializers.CharField(),
                "actions": serializers.ListField(child=serializers.CharField()),
            },
        )
    )
    def get(self, request: Request) -> Response:
        credential: Any = request.auth
        return Response(
            {
                "id": str(credential.pk),
                "name": credential.name,
                "tenant": credential.tenant.slug,
                "actions": list(credential.actions),
                "embedded_database": settings.DATABASE_TARGET.embedded,
            }
        )
