"""Every operation of the OpenAPI schema says what the server does, checked by walking the
schema, so an operation added later cannot miss it: its credential actions (and the server
refuses a credential without them), ``Idempotency-Key`` wherever the handler honours it, the
problem statuses the request pipeline can give, paginated envelopes for listings, and a
declared shape (never a free-form object) for every success."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from django.urls import resolve

from apps.api.access import required_actions
from apps.api.idempotency import honours_key
from tests.conftest import make_agent

from .contract import openapi
from .support import assert_problem

EVERY_ACTION = ["read", "write", "search", "delete", "review", "state", "erase", "audit"]
# The one answer with ``results`` that is not a page: a search returns its top_k at once.
SEARCH = "/api/v1/search"
PLACEHOLDER = re.compile(r"\{(\w+)\}")


def _operations() -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (path, method.upper(), operation)
        for path, operations in openapi()["paths"].items()
        for method, operation in operations.items()
    ]


def _concrete(path: str) -> str:
    """``path`` with each parameter filled in (an id nothing has)."""

    def value(match: re.Match[str]) -> str:
        return "consent-1" if match.group(1) == "consent_ref" else str(uuid.uuid4())

    return PLACEHOLDER.sub(value, path)


def _view(path: str) -> Any:
    match = resolve(_concrete(path))
    return match.func.view_class if hasattr(match.func, "view_class") else match.func.cls


def _handler(path: str, method: str) -> Any:
    return getattr(_view(path), method.lower())


OPERATIONS = _operations()
IDS = [f"{method} {path}" for path, method, _ in OPERATIONS]


def _secured(operation: dict[str, Any]) -> bool:
    return any(operation.get("security") or [])


@pytest.mark.parametrize(("path", "method", "operation"), OPERATIONS, ids=IDS)
def test_each_operation_names_its_credential_actions(path, method, operation):
    if not _secured(operation):
        assert "x-required-actions" not in operation
        return
    documented = operation["x-required-actions"]
    assert documented == list(required_actions(_view(path), method))
    assert set(documented) <= set(EVERY_ACTION)
    for action in documented:
        assert f"`{action}`" in operation["description"]
    assert ("403" in operation["responses"]) == bool(documented)


ACTION_BOUND = [op for op in OPERATIONS if op[2].get("x-required-actions")]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("path", "method", "operation"), ACTION_BOUND, ids=[f"{m} {p}" for p, m, _ in ACTION_BOUND]
)
def test_the_server_refuses_a_credential_without_the_documented_action(
    tenant, path, method, operation
):
    actions = operation["x-required-actions"]
    lacking = make_agent(tenant, ",".join(a for a in EVERY_ACTION if a not in actions))
    call = getattr(lacking.client, method.lower())
    headers = {"Authorization": f"Bearer {lacking.token}"}
    response = call(_concrete(path), content_type="application/json", headers=headers)
    body = assert_problem(response, 403)
    assert all(f"'{action}'" in body["detail"] for action in actions)
    holding = make_agent(tenant, actions[0], name="holding")
    call = getattr(holding.client, method.lower())
    headers = {"Authorization": f"Bearer {holding.token}"}
    response = call(_concrete(path), content_type="application/json", headers=headers)
    assert response.status_code != 403 or "lacks" not in response.json()["detail"]


@pytest.mark.parametrize(("path", "method", "operation"), OPERATIONS, ids=IDS)
def test_each_post_documents_idempotency_key_where_honoured(path, method, operation):
    headers = {p["name"] for p in operation.get("parameters", []) if p["in"] == "header"}
    honoured = honours_key(_handler(path, method))
    assert ("Idempotency-Key" in headers) == honoured
    if method != "POST":
        assert not honoured
        return
    assert honoured, f"POST {path} does not honour Idempotency-Key"
    assert {"409", "422"} <= set(operation["responses"])


@pytest.mark.parametrize(("path", "method", "operation"), OPERATIONS, ids=IDS)
def test_each_operation_documents_the_problems_it_can_give(path, method, operation):
    codes = set(operation["responses"])
    assert {"406", "414", "503"} <= codes
    if _secured(operation):
        assert {"400", "401", "429"} <= codes
    if "requestBody" in operation:
        assert {"400", "413", "415"} <= codes
    else:
        # A body is refused (400) whatever it holds: never too large nor of the wrong type.
        assert not {"413", "415"} & codes
    if "{" in path:
        assert "404" in codes
    for code, response in operation["responses"].items():
        if int(code) >= 400:
            assert list(response["content"]) == ["application/problem+json"], (code, path)
    if "429" in codes:
        assert "Retry-After" in operation["responses"]["429"].get("headers", {})


def _resolve(schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = openapi()["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
    return schema


@pytest.mark.parametrize(("path", "method", "operation"), OPERATIONS, ids=IDS)
def test_each_success_has_a_declared_shape(path, method, operation):
    for code, response in operation["responses"].items():
        if not code.startswith("2"):
            continue
        (media,) = response["content"].values()
        schema = _resolve(media["schema"])
        # A listing is a page, never a bare array; nothing answers a free-form object.
        assert schema.get("type") != "array", (code, path)
        assert schema.get("properties") or schema.get("oneOf"), (code, path, schema)
        if "oneOf" in schema:
            continue
        if schema["properties"].get("results", {}).get("type") == "array" and path != SEARCH:
            assert set(schema["required"]) >= {"next", "previous", "results"}, path
            assert schema["properties"]["results"]["type"] == "array"


def test_the_listings_are_paginated():
    paths = openapi()["paths"]
    for path in [
        "/api/v1/records",
        "/api/v1/conflicts",
        "/api/v1/promotion-requests",
        "/api/v1/runs",
        "/api/v1/obligations",
        "/api/v1/deletion-receipts",
        "/api/v1/audit-events",
        "/api/v1/runs/{run_id}/episodes",
    ]:
        assert getattr(_view(path), "pagination_class", None), path
        ref = paths[path]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
        assert ref["$ref"].rsplit("/", 1)[-1].startswith("Paginated"), path
        assert "cursor" in {p["name"] for p in paths[path]["get"]["parameters"]}


def test_delete_documents_its_reason_and_dry_run():
    operation = openapi()["paths"]["/api/v1/records/{record_id}"]["delete"]
    assert {"reason", "dry_run"} <= {p["name"] for p in operation["parameters"]}
    assert "409" in operation["responses"]


def test_the_erasure_documents_its_job():
    responses = openapi()["paths"]["/api/v1/erasures"]["post"]["responses"]
    assert responses["202"]["content"]["application/json"]["schema"]["$ref"].endswith("/ErasureJob")


def test_request_bodies_admit_only_their_members():
    components = openapi()["components"]["schemas"]
    assert components["RecordWriteInput"]["additionalProperties"] is False
    assert components["ScopeInput"]["additionalProperties"] is False
    # Free-form members (a scope's conditions) stay open; responses are never closed.
    conditions = components["ScopeInput"]["properties"]["conditions"]
    assert conditions.get("additionalProperties") is not False
    assert "additionalProperties" not in components["Record"]
