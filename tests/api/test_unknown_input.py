"""Every API route refuses a query parameter or body field it does not know, naming it.

Iterates the URLconf, so a new route is covered without being listed here.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from tests.conftest import make_agent

from .support import assert_problem

pytestmark = pytest.mark.django_db

ALL_ACTIONS = "read,write,search,delete,review,state,erase,audit"
BODY_METHODS = {"post", "put", "patch"}
NOT_CHECKED = {"api-health"}  # no credential, no parameters: nothing can fall through


def _api_routes() -> Iterator[tuple[str, str, type]]:
    def walk(patterns: list, prefix: str) -> Iterator[tuple[str, str, type]]:
        for pattern in patterns:
            route = prefix + str(pattern.pattern)
            if isinstance(pattern, URLResolver):
                yield from walk(pattern.url_patterns, route)
            elif isinstance(pattern, URLPattern) and route.startswith("api/v1/"):
                view = getattr(pattern.callback, "cls", None)
                if view is not None and pattern.name not in NOT_CHECKED:
                    yield route, pattern.name or route, view

    yield from walk(get_resolver().url_patterns, "")


def _path(route: str) -> str:
    import re

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
