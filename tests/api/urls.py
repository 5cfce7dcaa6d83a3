"""A test URLconf: the project's routes plus views that exercise the error paths.

Used with ``@pytest.mark.urls("tests.api.urls")``. Django takes the error handlers from the
root URLconf, so they are repeated here.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import HttpRequest, HttpResponse
from django.urls import path
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.audit.services import audit_record
from apps.core.actors import Actor
from apps.core.errors import DomainError
from memoryconsole.urls import urlpatterns as project_urlpatterns


class ItemInput(serializers.Serializer):
    n = serializers.IntegerField()


class EchoInput(serializers.Serializer):
    name = serializers.CharField()
    items = ItemInput(many=True, required=False)
    tags = serializers.ListField(child=serializers.IntegerField(), required=False)


class EchoView(APIView):
    """Parses and validates a JSON body (needs ``write``)."""

    required_action = "write"

    def post(self, request: Request) -> Response:
        serializer = EchoInput(data=request.data)
        serializer.is_valid(raise_exception=True)
        return Response(serializer.validated_data, status=201)


class RejectedWriteView(APIView):
    """Writes an audit event, then refuses the request: the write must not survive."""

    required_action = "write"

    def post(self, request: Request) -> Response:
        credential: Any = request.auth
        audit_record(
            tenant=credential.tenant_id,
            actor=Actor.for_credential(credential),
            action="test.rejected",
        )
        raise DomainError("Refused after writing.")


class DjangoValidationView(APIView):
    required_action = "write"

    def post(self, request: Request) -> Response:
        raise DjangoValidationError({"when": ["must be in the past"]})


class BoomView(APIView):
    """An unexpected exception inside a DRF view."""

    authentication_classes: list[Any] = []
    permission_classes = [AllowAny]

    def get(self, request: Request) -> Response:
        raise RuntimeError("boom")


def django_boom(request: HttpRequest) -> HttpResponse:
    """An unexpected exception in a plain Django view under /api/ (Django's handler500)."""
    raise RuntimeError("boom")


def html_boom(request: HttpRequest) -> HttpResponse:
    """The same outside /api/: Django's own error page."""
    raise RuntimeError("boom")


urlpatterns = [
    path("api/v1/_test/echo", EchoView.as_view()),
    path("api/v1/_test/rejected-write", RejectedWriteView.as_view()),
    path("api/v1/_test/django-validation", DjangoValidationView.as_view()),
    path("api/v1/_test/boom", BoomView.as_view()),
    path("api/v1/_test/django-boom", django_boom),
    path("_test/html-boom", html_boom),
    *project_urlpatterns,
]

handler400 = "apps.core.problems.handler400"
handler403 = "apps.core.problems.handler403"
handler404 = "apps.core.problems.handler404"
handler500 = "apps.core.problems.handler500"
