"""Platform endpoints of the API: health and the calling credential."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.decorators import api_view, authentication_classes, permission_classes
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memoryconsole.celery import broker_status

from .problems import PROBLEM_CONTENT_TYPE, problem_body
from .schema import ProblemSerializer


class HealthSerializer(serializers.Serializer[dict[str, str]]):
    database = serializers.CharField(help_text='"ok" when the database answers.')
    vector = serializers.CharField(help_text="The pgvector extension's version.")
    broker = serializers.CharField(help_text='"ok (<transport>)" or "unreachable (<transport>)".')


class CredentialSerializer(serializers.Serializer[dict[str, Any]]):
    id = serializers.UUIDField()
    name = serializers.CharField()
    tenant = serializers.CharField(help_text="The tenant's slug.")
    actions = serializers.ListField(child=serializers.CharField())
    embedded_database = serializers.BooleanField(
        help_text="Whether the server runs on its embedded PostgreSQL."
    )


def _unavailable(detail: str) -> Response:
    return Response(problem_body(503, detail), status=503, content_type=PROBLEM_CONTENT_TYPE)


# Not in the request's transaction: with the database down, ATOMIC_REQUESTS would fail before
# the view runs, and the answer must be a 503 that says so.
@transaction.non_atomic_requests
@extend_schema(
    auth=[],
    responses={
        200: HealthSerializer,
        (503, PROBLEM_CONTENT_TYPE): OpenApiResponse(
            ProblemSerializer, description="The database or pgvector is unavailable."
        ),
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
    except DatabaseError:
        return _unavailable("The database is unreachable.")
    if row is None:
        return _unavailable("The database lacks the 'vector' extension (pgvector).")
    return Response({"database": "ok", "vector": row[0], "broker": broker_status()})


class MeView(APIView):
    """The credential making the request: its tenant, name and actions."""

    @extend_schema(responses=CredentialSerializer)
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
