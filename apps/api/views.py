"""The calling credential. (The health endpoint joins every layer: memoryconsole/health.py.)"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from .contract import ContractView


class CredentialSerializer(serializers.Serializer[dict[str, Any]]):
    id = serializers.UUIDField()
    name = serializers.CharField()
    tenant = serializers.CharField(help_text="The tenant's slug.")
    actions = serializers.ListField(child=serializers.CharField())
    sees_restricted = serializers.BooleanField(
        help_text="Whether its reads include memories of the restricted sensitivity class "
        "(true unless it was issued without)."
    )
    embedded_database = serializers.BooleanField(
        help_text="Whether the server runs on its embedded PostgreSQL."
    )


class MeView(ContractView):
    """The credential making the request: its tenant, name, actions and whether it sees
    restricted memories."""

    @extend_schema(responses=CredentialSerializer)
    def get(self, request: Request) -> Response:
        credential: Any = request.auth
        return Response(
            {
                "id": str(credential.pk),
                "name": credential.name,
                "tenant": credential.tenant.slug,
                "actions": list(credential.actions),
                "sees_restricted": credential.sees_restricted,
                "embedded_database": settings.DATABASE_TARGET.embedded,
            }
        )
