"""Every API route refuses a query parameter or body field it does not know, naming it, and a
body where it takes none.

Iterates the URLconf, so a new route is covered without being listed here.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from apps.api.contract import ContractMixin, serializer_for
from memoryconsole import health
from tests.conftest import make_agent
from tests.records.factories import body as record_body

from .contract import openapi
from .support import PROBLEM, assert_problem, footprint, objects_of_every_kind, tenant_state_tables

pytestmark = pytest.mark.django_db

ALL_ACTIONS = "read,write,search,delete,review,state,erase,audit"
BODY_METHODS = {"post", "put", "patch"}
# No credential, no parameters: nothing can fall through (its body is refused all the same).
NOT_CHECKED = {"api-health", "api-health-ready", "api-health-live"}


def _api_routes(*, include_unchecked: bool = False) -> Iterator[tuple[str, str, type]]:
    def walk(patterns: list, prefix: str) -> Iterator[tuple[str, str, type]]:
        for pattern in patterns:
            route = prefix + str(pattern.pattern)
            if isinstance(pattern, URLResolver):
                yield from walk(pattern.url_patterns, route)
            elif isinstance(pattern, URLPattern) and route.startswith("api/v1/"):
                view = getattr(pattern.callback, "cls", None)
                if view is not None and (include_unchecked or pattern.name not in NOT_CHECKED):
                    yield route, pattern.name or route, view

    yield from walk(get_resolver().url_patterns, "")


def _path(route: str) -> str:
    return "/" + re.sub(r"<(?:\w+:)?(\w+)>", lambda m: str(uuid.uuid4()), route)


def _cases() -> list[tuple[str, str, str]]:
    cases = []
    for route, name, view in _api_routes():
        for method in ("get", "post", "put", "patch", "delete"):
            if hasattr(view, method):
                cases.append((name, route, method))
    return cases


CASES = _cases()


def test_it_finds_the_api_routes():
    names = {name for name, _, _ in CASES}
    assert {"api-erasures", "api-record", "api-records", "api-runs"} <= names
    assert len(CASES) > 30


@pytest.mark.parametrize(("name", "route", "method"), CASES, ids=[f"{m} {n}" for n, _, m in CASES])
def test_it_refuses_an_unknown_query_parameter(tenant, name, route, method):
    agent = make_agent(tenant, ALL_ACTIONS)
    path = _path(route) + "?no_such_option=true"
    headers = {"Authorization": f"Bearer {agent.token}"}
    if method in BODY_METHODS:
        response = getattr(agent.client, method)(
            path, {}, content_type="application/json", headers=headers
        )
    else:
        response = getattr(agent.client, method)(path, headers=headers)
    body = assert_problem(response, 400)
    assert "no_such_option" in body["errors"], body
    assert "no_such_option" in body["detail"]


BODY_CASES = [case for case in CASES if case[2] in BODY_METHODS]


@pytest.mark.parametrize(
    ("name", "route", "method"), BODY_CASES, ids=[f"{m} {n}" for n, _, m in BODY_CASES]
)
def test_it_refuses_an_unknown_body_field(tenant, name, route, method):
    agent = make_agent(tenant, ALL_ACTIONS)
    response = getattr(agent.client, method)(
        _path(route),
        {"no_such_field": True},
        content_type="application/json",
        headers={"Authorization": f"Bearer {agent.token}"},
    )
    body = assert_problem(response, 400)
    assert "no_such_field" in body["errors"], body


def test_it_names_an_unknown_nested_field(tenant):
    from tests.records.factories import body as record_body

    agent = make_agent(tenant, ALL_ACTIONS)
    payload = record_body()
    payload["scope"] = {**payload["scope"], "domian": "x"}
    response = agent.post("/api/v1/records", payload)
    assert "scope.domian" in assert_problem(response, 400)["errors"]


def test_it_still_asks_for_a_credential_first(client):
    response = client.get("/api/v1/records?no_such_option=1")
    assert_problem(response, 401)


def test_it_accepts_the_documented_parameters(tenant):
    agent = make_agent(tenant, ALL_ACTIONS)
    assert agent.get("/api/v1/records", {"subject": "user:1", "page_size": "5"}).status_code == 200
    assert agent.get("/api/v1/runs", {"page_size": "5"}).status_code == 200


# --- a body the operation does not take ---------------------------------------------------------
#
# Every route, every method it answers (HEAD and OPTIONS too), with real objects in its path, so
# that an operation which ignored the body would act: a JSON member no operation takes, text
# that is not JSON, a JSON body without a Content-Type (which DRF reads as no body) and one sent
# in chunks (which Django reads as none). An operation without a body refuses each (400 naming
# `body`, or the member); one with a body refuses the member and the chunks (400) and a body it
# cannot read as JSON (415). Nothing changes either way.

UNEXPECTED_BODIES: dict[str, tuple[bytes, str, dict[str, str]]] = {
    "json member": (b'{"no_such_member": true, "dry_run": true}', "application/json", {}),
    "text": (b"not json", "text/plain", {}),
    "no content type": (b'{"dry_run": true}', "", {}),
    # What Django sees of a chunked body under gunicorn: the header, and no Content-Length.
    "chunked": (b"", "application/json", {"Transfer-Encoding": "chunked"}),
}
UNREADABLE_AS_JSON = {"text", "no content type"}


def _every_operation() -> list[tuple[str, str, str, bool]]:
    """(name, route, method, whether it takes a body) for every API route, health included."""
    operations = []
    for route, name, view in _api_routes(include_unchecked=True):
        contract = issubclass(view, ContractMixin)
        for method in ("get", "post", "put", "patch", "delete"):
            if hasattr(view, method):
                operations.append((name, route, method, takes_body(view, method)))
        if contract:  # health answers GET only (405); its body is refused on GET
            operations += [(name, route, "head", False)] if hasattr(view, "get") else []
            operations.append((name, route, "options", False))
    return operations


def takes_body(view: type, method: str) -> bool:
    return serializer_for(view, method, "body") is not None


def _schema_path(route: str) -> str:
    return "/" + re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", route)


def test_the_body_walk_covers_every_operation_of_the_schema():
    walked = {(_schema_path(route), method) for _, route, method, _ in _every_operation()}
    for path, operations in openapi()["paths"].items():
        for method in operations:
            if method in {"get", "post", "put", "patch", "delete"}:
                assert (path, method) in walked, (path, method)


@pytest.mark.parametrize("kind", UNEXPECTED_BODIES)
def test_every_operation_refuses_a_body_it_does_not_take_and_changes_nothing(
    tenant, other_tenant, monkeypatch, kind
):
    monkeypatch.setattr(health, "broker_status", lambda: "ok (stub)")
    agent = make_agent(tenant, ALL_ACTIONS)
    ids = objects_of_every_kind(agent, record_body())
    tables, tenants = tenant_state_tables(), [tenant.pk, other_tenant.pk]
    data, content_type, headers = UNEXPECTED_BODIES[kind]
    wrong = []
    for _, route, method, body_taken in _every_operation():
        path = "/" + re.sub(r"<(?:\w+:)?(\w+)>", lambda m: ids.get(m[1], str(uuid.uuid4())), route)
        before = footprint(tenants, tables)
        response = agent.client.generic(
            method.upper(),
            path,
            data=data,
            content_type=content_type,
            headers={"Authorization": f"Bearer {agent.token}", **headers},
        )
        changed = sorted(
            table for table, digest in footprint(tenants, tables).items() if before[table] != digest
        )
        expected = 415 if body_taken and kind in UNREADABLE_AS_JSON else 400
        named = "no_such_member" if kind == "json member" else "body"
        problem = json.loads(response.content) if response.content else {}
        if response.status_code != expected or changed or response["Content-Type"] != PROBLEM:
            wrong.append(f"{method.upper()} {path}: {response.status_code}, changed {changed}")
        elif expected == 400 and method != "head" and named not in problem.get("errors", {}):
            wrong.append(f"{method.upper()} {path}: 400 not naming {named}: {problem}")
    assert not wrong, "\n".join(wrong)


def test_a_head_is_checked_as_its_get(tenant):
    agent = make_agent(tenant, ALL_ACTIONS)
    writer = make_agent(tenant, "write", name="writer")

    def head(who: Any, path: str) -> int:
        return int(who.client.head(path, headers=_bearer(who)).status_code)

    assert head(agent, "/api/v1/facts") == 400  # subject is required, as on GET
    assert head(agent, "/api/v1/facts?subject=user:1") == 200
    assert head(agent, "/api/v1/records?bogus=1") == 400
    assert head(writer, "/api/v1/records") == 403  # GET needs read


def _bearer(agent: Any) -> dict[str, str]:
    return {"Authorization": f"Bearer {agent.token}"}
