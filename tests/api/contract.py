"""A response against the OpenAPI schema's declaration for its operation and status."""

from __future__ import annotations

import copy
import functools
import json
from typing import Any

import jsonschema
from drf_spectacular.generators import SchemaGenerator

REF_PREFIX = "#/components/schemas/"


@functools.cache
def openapi() -> dict[str, Any]:
    schema: dict[str, Any] = SchemaGenerator().get_schema(request=None, public=True)
    return schema


def _json_schema(node: Any) -> Any:
    """OpenAPI 3.0's schema dialect as JSON Schema: ``nullable`` becomes a null alternative."""
    if isinstance(node, list):
        return [_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    converted = {key: _json_schema(value) for key, value in node.items() if key != "nullable"}
    if node.get("nullable"):
        if isinstance(converted.get("type"), str) and "enum" not in converted:
            converted["type"] = [converted["type"], "null"]
        else:
            converted = {"anyOf": [converted, {"type": "null"}]}
    return converted


@functools.cache
def _components() -> dict[str, Any]:
    schemas = copy.deepcopy(openapi()["components"]["schemas"])
    return {name: _json_schema(schema) for name, schema in schemas.items()}


def declared(path: str, method: str, status: int) -> dict[str, Any]:
    """The JSON schema of the ``status`` response of ``method path`` (a template path)."""
    operation = openapi()["paths"][path][method.lower()]
    response = operation["responses"].get(str(status))
    assert response is not None, f"{method} {path} does not document {status}"
    content = response.get("content", {})
    assert len(content) == 1, content
    (media,) = content.values()
    return _json_schema(media["schema"])


def assert_conforms(response: Any, path: str, method: str) -> Any:
    """``response`` (Django's test client) is what ``method path`` declares for its status;
    returns its JSON body."""
    body = json.loads(response.content)
    schema = {**declared(path, method, response.status_code), "components": {"schemas": {}}}
    schema["components"]["schemas"] = _components()
    try:
        jsonschema.validate(body, schema, cls=jsonschema.Draft7Validator)
    except jsonschema.ValidationError as error:
        where = "/".join(str(p) for p in error.absolute_path)
        raise AssertionError(
            f"{method} {path} {response.status_code}: at {where or 'the top'}: {error.message}"
        ) from None
    return body


def admits(path: str, method: str, body: Any) -> bool:
    """Whether the schema's request body of ``method path`` admits ``body``, formats
    included, with ECMAScript's regular expressions (as schemathesis and JSON Schema clients
    read them: ``$`` is the end of the text, not also before a final newline)."""
    import jsonschema_rs

    operation = openapi()["paths"][path][method.lower()]
    (media,) = operation["requestBody"]["content"].values()
    schema = {**_json_schema(media["schema"]), "components": {"schemas": _components()}}
    return bool(jsonschema_rs.Draft7Validator(schema, validate_formats=True).is_valid(body))
