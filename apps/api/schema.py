"""OpenAPI: what every operation takes, needs and can answer, derived from the code that
decides it.

``ProblemAutoSchema`` builds each operation from:

* its input: the serializers that validate it at run time (``query_input`` and ``body_input``
  of a :class:`~apps.api.contract.ContractView`), so the schema and the check cannot drift;
* ``x-required-actions``: the credential actions it accepts (any one suffices; empty: any
  credential), read from the same declaration that :class:`~apps.api.access.IsAgent`
  enforces, and said in the description;
* the ``Idempotency-Key`` header, on exactly the operations whose handler honours it;
* every problem response the request pipeline can give (a ``400`` for an invalid or
  undeclared query parameter or body member, ``401``/``403``/``429`` for authenticated
  operations, ``409``/``422`` for an idempotency key (and ``410``, the ``IdempotencyTombstone``
  problem, where a retry replays a stored response), ``413``/``415`` for bodies, ``414`` for a
  URL too long to read, ``503`` while the database is away or a request runs out of time),
  each as the one ``Problem`` component. An operation's own ``@extend_schema(responses=...)``
  keeps its description for a status it names; the pipeline's is appended to it.
"""

from __future__ import annotations

import copy
from typing import Any

from django.conf import settings
from drf_spectacular.extensions import OpenApiSerializerExtension, OpenApiSerializerFieldExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import ComponentRegistry
from drf_spectacular.utils import Direction, OpenApiParameter, extend_schema_field
from rest_framework import serializers

from apps.core.pagination import PAGE_LINK
from apps.core.problems import DATABASE_RETRY_AFTER, PROBLEM_CONTENT_TYPE

from .access import required_actions
from .contract import ContractMixin, QueryJSONObjectField, serializer_for
from .idempotency import HEADER as IDEMPOTENCY_HEADER
from .idempotency import MAX_KEY_LENGTH, TOMBSTONE_STATUS, honours_key, replays_stored


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


@extend_schema_field(dict(PAGE_LINK))
class PageLinkField(serializers.CharField):
    """A page's ``next`` or ``previous`` link, for a page serializer written by hand: the same
    schema as the links of :class:`apps.core.pagination.CursorPage`."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(allow_null=True, **kwargs)


class IdempotencyTombstoneSerializer(ProblemSerializer):
    """The ``410`` of a retry (same ``Idempotency-Key``, same body) whose first request
    succeeded, when what its response described has since been deleted or has expired: the
    first response is not replayed, since it held that content, and nothing is done again."""

    id = serializers.CharField(help_text="The id of what the first response described.")
    state = serializers.ChoiceField(
        choices=["deleted", "expired"], help_text="Why it cannot be shown again."
    )
    first_status = serializers.IntegerField(
        help_text="The status the first request was answered with (`201`, `200`): it "
        "succeeded, once."
    )


TOMBSTONE_DESCRIPTION = (
    "A retry with this Idempotency-Key and the same body, after what the first (successful) "
    "response described was deleted or expired: `id`, `state` (`deleted` or `expired`) and "
    "`first_status` say so; nothing was done again (`Idempotent-Replayed: true`, "
    "`Idempotent-Tombstone: true`)."
)
TOMBSTONE_HEADERS = {
    "Idempotent-Replayed": {"schema": {"type": "string", "enum": ["true"]}},
    "Idempotent-Tombstone": {"schema": {"type": "string", "enum": ["true"]}},
}

EXTENSION_ACTIONS = "x-required-actions"

# Printable ASCII (what the handler accepts), without spaces at either end: HTTP strips them,
# so a key sent with one would reach the server as another key.
IDEMPOTENCY_KEY_PATTERN = rf"^[!-~](?:[ -~]{{0,{MAX_KEY_LENGTH - 2}}}[!-~])?$"
IDEMPOTENCY_PARAMETER: dict[str, Any] = {
    "in": "header",
    "name": IDEMPOTENCY_HEADER,
    "required": False,
    "schema": {"type": "string", "maxLength": MAX_KEY_LENGTH, "pattern": IDEMPOTENCY_KEY_PATTERN},
    "description": (
        f"1 to {MAX_KEY_LENGTH} printable ASCII characters. A retry with the same key and "
        "body returns the first response (`Idempotent-Replayed: true`) with no second effect; "
        "the same key with another body is a `422`, and while the first request with it is "
        "still in progress, a `409`. Kept 24 hours per credential."
    ),
}
RETRY_AFTER = {
    "Retry-After": {"schema": {"type": "integer"}, "description": "Seconds to wait."},
}


def _problem_codes(
    operation: dict[str, Any],
    *,
    actions: tuple[str, ...],
    idempotent: bool,
    tombstones: bool,
    checks_input: bool,
    takes_body: bool,
) -> dict[int, tuple[str, dict[str, Any]]]:
    """The problem responses the request pipeline can give: {status: (description, headers)}."""
    parameters = operation.get("parameters", [])
    secured = any(operation.get("security") or [])
    codes: dict[int, tuple[str, dict[str, Any]]] = {}
    if takes_body:
        codes[400] = (
            "Invalid or malformed request body, or a body member or query parameter that is "
            "invalid or that the operation does not declare (each named under `errors`).",
            {},
        )
    elif checks_input:
        codes[400] = (
            "An invalid query parameter, or one the operation does not declare (named under "
            "`errors`); or a body, which this operation does not take (`body`, or the members "
            "of a JSON object, named under `errors`).",
            {},
        )
    if secured:
        codes[401] = ("No, malformed, unknown or revoked bearer token.", {})
        if actions:
            codes[403] = (
                f"The credential lacks the {' or '.join(f'`{a}`' for a in actions)} action.",
                {},
            )
    if any(p.get("in") == "path" for p in parameters):
        codes[404] = ("No such object in the credential's tenant.", {})
    codes[406] = ("The Accept header excludes JSON and problem+json.", {})
    if idempotent:
        codes[409] = ("A request with this Idempotency-Key is still in progress.", {})
        codes[422] = ("This Idempotency-Key was used with a different request.", {})
    if tombstones:
        codes[TOMBSTONE_STATUS] = (TOMBSTONE_DESCRIPTION, TOMBSTONE_HEADERS)
    codes[414] = ("The URL (its query string, most often) is longer than the server reads.", {})
    if takes_body:
        codes[413] = (
            f"The request body exceeds {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes, or a "
            "content field is over its size limit (named under `errors`).",
            {},
        )
        codes[415] = ("The body is not application/json.", {})
    if secured:
        codes[429] = (
            "Too many failed authentications from this address: every request is refused "
            "until `Retry-After` seconds have passed.",
            RETRY_AFTER,
        )
    codes[503] = (
        "The database is unavailable (type `.../database-unavailable`), or the request ran "
        "out of time waiting for it, a lock held by other work say (`.../database-timeout`); "
        f"nothing was changed. Retry after `Retry-After` seconds ({DATABASE_RETRY_AFTER}).",
        RETRY_AFTER,
    )
    return codes


class ProblemAutoSchema(AutoSchema):
    """drf-spectacular's schema, plus what every operation takes, needs and can answer."""

    def _contract(self, kind: str) -> Any:
        if not isinstance(self.view, ContractMixin):
            return None
        return serializer_for(self.view, self.method, kind)

    def _get_format_parameters(self) -> list[Any]:
        # drf-spectacular offers ``?format=`` where a view has several renderers (an export's
        # stream beside its errors' JSON); the contract refuses every query parameter an
        # operation does not declare, that one included, so it is never offered.
        return []

    def get_request_serializer(self) -> Any:
        if isinstance(self.view, ContractMixin):
            return self._contract("body")
        return super().get_request_serializer()

    def get_override_parameters(self) -> list[OpenApiParameter | Any]:
        parameters: list[OpenApiParameter | Any] = list(super().get_override_parameters())
        query = self._contract("query")
        if query is not None:
            parameters.insert(0, query)
        return parameters

    def _json_query_parameters(self) -> set[str]:
        query = self._contract("query")
        if query is None:
            return set()
        return {
            name
            for name, field in query().fields.items()
            if isinstance(field, QueryJSONObjectField)
        }

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
        method = method.upper()
        body = self._contract("body")
        if body is not None and "requestBody" not in operation:
            # drf-spectacular documents a body on POST, PUT and PATCH only; a DELETE that
            # takes one (a deletion's reason) declares it the same way.
            schema = self.resolve_serializer(body, "request").ref
            operation["requestBody"] = {
                "content": {media: {"schema": schema} for media in self.map_parsers()}
            }
        ref = self.resolve_serializer(ProblemSerializer, "response").ref
        tombstone_ref = self.resolve_serializer(IdempotencyTombstoneSerializer, "response").ref
        handler = getattr(self.view, method.lower(), None)
        idempotent = honours_key(handler)
        secured = any(operation.get("security") or [])
        actions = required_actions(self.view, method) if secured else ()

        if secured:
            operation[EXTENSION_ACTIONS] = list(actions)
            needs = (
                f"Needs a credential with the {' or '.join(f'`{a}`' for a in actions)} action."
                if actions
                else "Needs any valid agent credential."
            )
            described = operation.get("description", "")
            operation["description"] = f"{described}\n\n{needs}" if described else needs

        if body is not None and "requestBody" in operation:
            # Required where an absent body (read as {}) is refused: a search needs a query or
            # a vector though no single member is required.
            operation["requestBody"]["required"] = not body(data={}, context={}).is_valid()

        json_parameters = self._json_query_parameters()
        for parameter in operation.get("parameters", []):
            if parameter.get("in") == "query" and parameter.get("name") in json_parameters:
                # A JSON object in the query string: content, so a client sends it as JSON.
                parameter["content"] = {"application/json": {"schema": parameter.pop("schema")}}
            if parameter.get("in") == "path" and parameter.get("name", "").endswith("_id"):
                # Every object id in a path is a UUID (a malformed one finds nothing: 404).
                parameter["schema"] = {"type": "string", "format": "uuid"}

        if idempotent:
            parameters = [
                p
                for p in operation.get("parameters", [])
                if not (p.get("in") == "header" and p.get("name") == IDEMPOTENCY_HEADER)
            ]
            operation["parameters"] = [*parameters, IDEMPOTENCY_PARAMETER]

        responses: dict[str, Any] = operation.setdefault("responses", {})

        # A contract view refuses a query parameter it does not declare, on every method.
        checks_input = isinstance(self.view, ContractMixin) or any(
            p.get("in") == "query" for p in operation.get("parameters", [])
        )
        codes = _problem_codes(
            operation,
            actions=actions,
            idempotent=idempotent,
            tombstones=replays_stored(handler),
            checks_input=checks_input,
            takes_body="requestBody" in operation,
        )
        for code, (description, headers) in codes.items():
            declared = responses.get(str(code))
            if declared is None:
                schema = tombstone_ref if code == TOMBSTONE_STATUS else ref
                response: dict[str, Any] = {
                    "content": {PROBLEM_CONTENT_TYPE: {"schema": schema}},
                    "description": description,
                }
                if headers:
                    response["headers"] = dict(headers)
                responses[str(code)] = response
            elif description not in declared.get("description", ""):
                declared["description"] = f"{declared.get('description', '')} Or: {description}"
        return operation


# drf-spectacular's extension base and its mapping methods (the documented way to extend what
# it generates) carry no annotations.
class StrictCharFieldSchema(OpenApiSerializerFieldExtension):  # type: ignore[no-untyped-call]
    """A strict string states what it refuses besides its length: a blank (``minLength``),
    NUL (a pattern), as :meth:`~apps.api.contract.StrictCharField.schema_constraints` says."""

    target_class = "apps.api.contract.StrictCharField"
    match_subclasses = True

    def map_serializer_field(self, auto_schema: AutoSchema, direction: Direction) -> Any:
        schema: dict[str, Any] = auto_schema._map_serializer_field(  # type: ignore[no-untyped-call]
            self.target, direction, bypass_extensions=True
        )
        return {**schema, **self.target.schema_constraints()}


class StrictSerializerSchema(OpenApiSerializerExtension):  # type: ignore[no-untyped-call]
    """A strict object states its list bounds (a ``many=True`` member's ``min_length`` and
    ``max_length``, which drf-spectacular leaves out) and its rules across members
    (``schema_rules`` of :class:`~apps.api.contract.StrictSerializer`)."""

    target_class = "apps.api.contract.StrictSerializer"
    match_subclasses = True

    def map_serializer(self, auto_schema: AutoSchema, direction: Direction) -> Any:
        schema: dict[str, Any] = auto_schema._map_serializer(  # type: ignore[no-untyped-call]
            self.target, direction, bypass_extensions=True
        )
        properties = schema.get("properties", {})
        for name, field in self.target.fields.items():
            if isinstance(field, serializers.ListSerializer) and name in properties:
                for bound, keyword in (("min_length", "minItems"), ("max_length", "maxItems")):
                    if (limit := getattr(field, bound, None)) is not None:
                        properties[name][keyword] = limit
        schema.update(copy.deepcopy(self.target.schema_rules))
        return schema


def strict_request_bodies(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: a request body's objects admit only the members
    they list.

    :class:`~apps.api.contract.StrictSerializer` refuses any other member with a ``400`` naming
    it, so the schema says ``additionalProperties: false`` for every object with listed
    ``properties`` reachable from a request body (through ``$ref``, properties, items,
    ``allOf``/``oneOf``/``anyOf``). A rule's subschema (``schema_rules``: properties without
    a ``type``) constrains members the object declares and stays open. Free-form objects
    (``payload``, ``conditions``) declare ``additionalProperties`` themselves and are left as
    they are. Request and response
    serializers are distinct classes, so no object component is shared with a response, where
    members may be added.
    """
    components: dict[str, Any] = result.get("components", {}).get("schemas", {})
    seen: set[str] = set()

    def close(node: Any) -> None:
        if isinstance(node, list):
            for item in node:
                close(item)
            return
        if not isinstance(node, dict):
            return
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
            name = ref.rsplit("/", 1)[-1]
            if name not in seen:
                seen.add(name)
                close(components.get(name))
        if (
            node.get("type") == "object"
            and isinstance(node.get("properties"), dict)
            and "additionalProperties" not in node
        ):
            node["additionalProperties"] = False
        for key, value in node.items():
            if key != "$ref":
                close(value)

    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            if isinstance(operation, dict):
                close(operation.get("requestBody"))
    return result
