"""Every request may name only what its operation documents: a misspelt option is a ``400``.

A destructive call with a misspelt option (``?dryrun=true``, ``{"dry-run": true}``) must never
fall through to its default and destroy. The accepted names come from the OpenAPI schema,
generated from the same ``extend_schema`` declarations and serializers that document each
operation, so the schema and the check cannot disagree: a parameter a view reads but does not
document is refused, and the test that walks every route says so.

Checked for every API view by one permission class (``DEFAULT_PERMISSION_CLASSES``), after the
credential (an unauthenticated request still gets its ``401`` first):

* query parameters, against the operation's ``in: query`` parameters;
* JSON body members, against the request body's schema, into nested objects and arrays of
  objects whose schema lists its properties (free-form objects such as ``payload`` are not
  looked into). A body-less operation accepts no member at all.

Strict booleans in query strings: :func:`query_flag` accepts ``true`` and ``false`` only.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from django.http import HttpRequest
from rest_framework import permissions
from rest_framework.request import Request

from .problems import Problem

BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
ROUTE_PARAMETER = re.compile(r"<(?:\w+:)?(\w+)>")


@functools.cache
def _schema() -> dict[str, Any]:
    from drf_spectacular.generators import SchemaGenerator

    generator = SchemaGenerator()  # type: ignore[no-untyped-call]
    schema: dict[str, Any] = generator.get_schema(request=None, public=True)  # type: ignore[no-untyped-call]
    return schema


def _operation(request: HttpRequest | Request, method: str) -> dict[str, Any] | None:
    # DRF's Request hands attribute reads to Django's request, resolver_match included.
    match = request.resolver_match
    if match is None or not match.route:
        return None
    path = "/" + ROUTE_PARAMETER.sub(r"{\1}", match.route)
    operation: dict[str, Any] | None = _schema()["paths"].get(path, {}).get(method.lower())
    return operation


def _resolve(schema: dict[str, Any]) -> dict[str, Any]:
    """Follow ``$ref`` (and a one-element ``allOf``, drf-spectacular's nullable reference)."""
    while True:
        if "$ref" in schema:
            name = schema["$ref"].rsplit("/", 1)[-1]
            schema = _schema()["components"]["schemas"].get(name, {})
        elif len(schema.get("allOf", [])) == 1:
            schema = schema["allOf"][0]
        else:
            return schema


def _unknown_members(data: Any, schema: dict[str, Any], prefix: str) -> list[str]:
    schema = _resolve(schema)
    if isinstance(data, list) and schema.get("type") == "array":
        items = schema.get("items", {})
        found: list[str] = []
        for index, item in enumerate(data):
            found.extend(_unknown_members(item, items, f"{prefix}[{index}]"))
        return found
    properties = schema.get("properties")
    if not isinstance(data, dict) or not isinstance(properties, dict):
        return []
    if schema.get("additionalProperties"):
        return []
    found = []
    for name, value in data.items():
        path = f"{prefix}.{name}" if prefix else str(name)
        if name not in properties:
            found.append(path)
        else:
            found.extend(_unknown_members(value, properties[name], path))
    return found


def _body_schema(operation: dict[str, Any]) -> dict[str, Any] | None:
    content = operation.get("requestBody", {}).get("content", {})
    for media in content.values():
        schema = media.get("schema")
        if isinstance(schema, dict):
            return schema
    return None


def unknown_input(request: Request, *, body: bool = True) -> dict[str, list[str]]:
    """``{name: [message]}`` for each query parameter or body member (unless ``body`` is
    False) the operation does not document; empty when it names only documented ones."""
    method = (request.method or "").upper()
    operation = _operation(request, method)
    if operation is None:
        return {}
    errors: dict[str, list[str]] = {}
    documented = sorted(
        p["name"] for p in operation.get("parameters", []) if p.get("in") == "query"
    )
    for name in request.query_params:
        if name not in documented:
            accepted = ", ".join(documented) if documented else "none"
            errors[name] = [f"Unknown query parameter (accepted here: {accepted})."]
    if body and method in BODY_METHODS:
        data = request.data
        schema = _body_schema(operation)
        if schema is None:
            unknown = sorted(str(name) for name in data) if isinstance(data, dict) else []
        else:
            unknown = _unknown_members(data, schema, "")
        for path in unknown:
            errors[path] = ["Unknown field."]
    return errors


class DocumentedInputOnly(permissions.BasePermission):
    """Refuses a request naming a query parameter or body member its operation does not
    document, before the view runs (so nothing is changed)."""

    def has_permission(self, request: Request, view: Any) -> bool:
        # The write boundary checks its body's members itself, with the rest of the write, so
        # that it names server-owned fields and audits the rejection (apps.records.validation).
        own_check = getattr(view, "checks_body_members", False)
        errors = unknown_input(request, body=not own_check)
        if errors:
            names = ", ".join(sorted(errors))
            raise Problem(f"Unknown parameter or field: {names}. Nothing was done.", errors=errors)
        return True


def query_flag(request: Request, name: str) -> bool:
    """A boolean query parameter: absent or ``false`` is False, ``true`` is True; anything
    else (``1``, ``yes``, ``True``, empty) is a 400 naming it, never a guess."""
    raw = request.query_params.get(name)
    if raw is None or raw == "false":
        return False
    if raw == "true":
        return True
    raise Problem(
        f"Query parameter {name} must be true or false.",
        errors={name: ["Must be true or false (lower case)."]},
    )
