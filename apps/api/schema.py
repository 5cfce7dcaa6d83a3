"""OpenAPI: the problem responses every operation can give, as one reusable component."""

from __future__ import annotations

from typing import Any

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import ComponentRegistry
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers

from .problems import PROBLEM_CONTENT_TYPE


class ProblemSerializer(serializers.Serializer[dict[str, Any]]):
    """RFC 9457 problem details, the body of every error response."""

    type = serializers.URLField(help_text="Identifies the kind of problem.")
    title = serializers.CharField(help_text="Short, human-readable summary of the kind.")
    status = serializers.IntegerField(help_text="The HTTP status code.")
    detail = serializers.CharField(help_text="What went wrong with this request.")

    def get_fields(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
        # ``errors`` cannot be declared as a class attribute: it would shadow Serializer.errors.
        fields = super().get_fields()
        fields["errors"] = serializers.DictField(
            child=serializers.ListField(child=serializers.CharField()),
            required=False,
            help_text="Validation failures: {field_path: [message, ...]}.",
        )
        return fields


BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


class ProblemAutoSchema(AutoSchema):
    """drf-spectacular's schema, plus the problem responses every operation can give.

    An operation's own ``@extend_schema(responses=...)`` wins for a status it names.
    """

    def get_operation(
        self,
        path: str,
        path_regex: str,
        path_prefix: str,
        method: str,
        registry: ComponentRegistry,
    ) -> dict[str, Any] | None:
        operation: dict[str, Any] | None = super().get_operation(
            path, path_regex, path_prefix, method, registry
        )
        if operation is None:
            return None
        ref = self.resolve_serializer(ProblemSerializer, "response").ref
        responses: dict[str, Any] = operation.setdefault("responses", {})
        parameters = operation.get("parameters", [])
        codes: dict[int, str] = {}
        if method.upper() in BODY_METHODS:
            codes[400] = "Invalid or malformed request body."
            codes[415] = "The body is not application/json."
        elif any(p.get("in") == "query" for p in parameters):
            codes[400] = "Invalid query parameters."
        if any(operation.get("security") or []):
            codes[401] = "No, malformed, unknown or revoked bearer token."
            codes[403] = "The credential lacks the action this operation needs."
        if any(p.get("in") == "path" for p in parameters):
            codes[404] = "No such object in the credential's tenant."
        codes[406] = "The Accept header excludes application/json."
        for code, description in codes.items():
            responses.setdefault(
                str(code),
                {"content": {PROBLEM_CONTENT_TYPE: {"schema": ref}}, "description": description},
            )
        return operation


# The query parameters of cursor-paginated listings, declared where the listing is (a plain
# APIView's paginator is invisible to drf-spectacular) so they are documented and accepted.
CURSOR_PARAMETER = OpenApiParameter(
    "cursor", OpenApiTypes.STR, description="The `next` or `previous` link's cursor."
)
PAGE_PARAMETERS = [
    CURSOR_PARAMETER,
    OpenApiParameter("page_size", OpenApiTypes.INT, description="Items per page (at most 500)."),
]
