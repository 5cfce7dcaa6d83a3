"""OpenAPI: each operation's input from its declared serializers (:mod:`apps.api.contract`),
and the problem responses every operation can give, as one reusable component."""

from __future__ import annotations

from typing import Any

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import ComponentRegistry
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
    """drf-spectacular's schema with each operation's input taken from the serializers that
    validate it (``query_input`` and ``body_input`` of a :class:`~apps.api.contract
    .ContractView`), plus the problem responses every operation can give.

    An operation's own ``@extend_schema(responses=...)`` wins for a status it names.
    """

    def _contract(self, kind: str) -> Any:
        from .contract import ContractMixin, serializer_for

        if not isinstance(self.view, ContractMixin):
            return None
        return serializer_for(self.view, self.method, kind)

    def get_request_serializer(self) -> Any:
        from .contract import ContractMixin

        if isinstance(self.view, ContractMixin):
            return self._contract("body")
        return super().get_request_serializer()

    def get_override_parameters(self) -> list[OpenApiParameter | Any]:
        parameters: list[OpenApiParameter | Any] = list(super().get_override_parameters())
        query = self._contract("query")
        if query is not None:
            parameters.insert(0, query)
        return parameters

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
        from .contract import ContractMixin

        if method.upper() in BODY_METHODS:
            codes[400] = "Invalid, unknown or malformed query parameters or body members."
            codes[413] = "The body, or a content field, is over its size limit."
            codes[415] = "The body is not application/json."
        elif isinstance(self.view, ContractMixin) or any(
            p.get("in") == "query" for p in parameters
        ):
            # Every operation refuses a query parameter it does not document.
            codes[400] = "Invalid, unknown or malformed query parameters."
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


def strict_request_bodies(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: every object schema a request body reaches
    (through ``$ref``, properties, items, ``allOf``) that lists its properties says
    ``additionalProperties: false``, as :class:`~apps.api.contract.StrictSerializer` refuses
    an undeclared member. Free-form objects (``payload``, ``conditions``) declare
    ``additionalProperties`` themselves and are left as they are."""
    components = result.get("components", {}).get("schemas", {})
    seen: set[str] = set()
    stack: list[Any] = []
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            for media in operation.get("requestBody", {}).get("content", {}).values():
                stack.append(media.get("schema"))
    while stack:
        schema = stack.pop()
        if not isinstance(schema, dict):
            continue
        if "$ref" in schema:
            name = schema["$ref"].rsplit("/", 1)[-1]
            if name not in seen:
                seen.add(name)
                stack.append(components.get(name))
            continue
        if isinstance(schema.get("properties"), dict) and "additionalProperties" not in schema:
            schema["additionalProperties"] = False
        stack.extend(schema.get("properties", {}).values())
        stack.append(schema.get("items"))
        stack.extend(schema.get("allOf", []))
        stack.extend(schema.get("oneOf", []))
    return result
