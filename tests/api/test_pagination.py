"""Every listing of the API pages one way: ``cursor`` and ``page_size`` in the query,
``{"next", "previous", "results"}`` back, links relative to the server.

The listings are read from the schema (a GET whose ``200`` has ``next``, ``previous`` and
``results``), so a new one joins the walk, or fails here until it is seeded.
"""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.conftest import make_agent
from tests.evaluation.support import decide, remember
from tests.factories import ConflictFactory, EvaluationRunFactory, PromotionRequestFactory
from tests.records.factories import body

from .contract import assert_conforms, openapi
from .support import assert_problem

pytestmark = pytest.mark.django_db

EVERY_ACTION = "read,write,search,delete,review,state,erase,audit"
SUBJECT = "user:walk"
LISTINGS = {
    "/api/v1/audit-events",
    "/api/v1/conflicts",
    "/api/v1/deletion-receipts",
    "/api/v1/evaluation/decisions-at-risk",
    "/api/v1/evaluation/runs",
    "/api/v1/facts",
    "/api/v1/obligations",
    "/api/v1/promotion-requests",
    "/api/v1/records",
    "/api/v1/runs",
    "/api/v1/runs/{run_id}/episodes",
}
# Decisions at risk page forward by their own keyset (a search's audit sequence and a hit's
# place in it), from the newest search: their `previous` is always null.
FORWARD_ONLY = {"/api/v1/evaluation/decisions-at-risk"}


def _resolved(schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref", "")
    return openapi()["components"]["schemas"][ref.rsplit("/", 1)[-1]] if ref else schema


def schema_listings() -> set[str]:
    found = set()
    for path, operations in openapi()["paths"].items():
        answer = operations.get("get", {}).get("responses", {}).get("200", {})
        schema = answer.get("content", {}).get("application/json", {}).get("schema", {})
        if {"next", "previous", "results"} <= set(_resolved(schema).get("properties", {})):
            found.add(path)
    return found


def test_every_listing_of_the_schema_is_walked_here():
    assert schema_listings() == LISTINGS


def test_every_listing_takes_cursor_and_page_size_and_links_pages_alike():
    for path in LISTINGS:
        operation = openapi()["paths"][path]["get"]
        names = {p["name"] for p in operation["parameters"] if p["in"] == "query"}
        assert {"cursor", "page_size"} <= names, path
        page = _resolved(operation["responses"]["200"]["content"]["application/json"]["schema"])
        for link in ("next", "previous"):
            assert page["properties"][link]["format"] == "uri-reference", (path, link)


def _key(item: dict[str, Any]) -> Any:
    if "search_event" in item:  # a decision at risk: one per (search, memory)
        return item["search_event"], item["memory"]["id"]
    return item["id"]


@pytest.fixture
def seeded(tenant):
    """At least two items in every listing of one tenant, and the path of each."""
    agent = make_agent(tenant, EVERY_ACTION, name="walker")
    for n, domain in enumerate(["commerce", "commerce", "support", "legal"]):
        # One key in two scopes: facts with the same key page apart.
        key = "walk.preference" if n < 3 else "walk.language"
        written = agent.post(
            "/api/v1/records",
            body(
                key=key,
                subject=SUBJECT,
                value=f"v{n}",
                source={"kind": "interaction", "ref": f"interaction:walk-{n}"},
                scope={"domain": domain, "task_type": f"t{n}"},
            ),
        )
        assert written.status_code == 201, written.content
    for n in range(3):
        gone = agent.post("/api/v1/records", body(subject=f"user:gone-{n}")).json()
        assert agent.delete(f"/api/v1/records/{gone['id']}").status_code == 200
    run = agent.post("/api/v1/runs", {"task_id": "walk", "owner": "service:walk"}).json()
    agent.post("/api/v1/runs", {"task_id": "walk-2", "owner": "service:walk"})
    for n in range(3):
        agent.post(f"/api/v1/runs/{run['id']}/episodes", {"role": "tool", "content": f"e{n}"})
        agent.post("/api/v1/obligations", {"task_id": "walk", "kind": "charge", "key": f"walk:{n}"})
    for _ in range(3):
        PromotionRequestFactory(tenant=tenant)
        ConflictFactory(tenant=tenant)
        EvaluationRunFactory(tenant=tenant)
    one, two = remember(agent, tenant, "one.preference"), remember(agent, tenant, "two.preference")
    decide(agent, "preference")
    agent.delete(f"/api/v1/records/{one}")
    agent.delete(f"/api/v1/records/{two}")
    paths = {path: (path, {}) for path in LISTINGS}
    paths["/api/v1/facts"] = ("/api/v1/facts", {"subject": SUBJECT})
    paths["/api/v1/runs/{run_id}/episodes"] = (f"/api/v1/runs/{run['id']}/episodes", {})
    return agent, paths


def _get(agent, url, params, template):
    response = agent.get(url, params)
    assert response.status_code == 200, (url, response.content[:300])
    return assert_conforms(response, template, "GET")


def _relative(link: str, path: str) -> str:
    parts = urlsplit(link)
    assert (parts.scheme, parts.netloc) == ("", ""), link
    assert parts.path == path, link
    return link


def test_every_listing_pages_one_item_at_a_time_without_a_gap_or_a_repeat(seeded):
    agent, paths = seeded
    for template in sorted(LISTINGS):
        path, params = paths[template]
        everything = _get(agent, path, {**params, "page_size": 500}, template)
        assert everything["next"] is None, template
        expected = [_key(item) for item in everything["results"]]
        assert len(expected) >= 2, template

        page = _get(agent, path, {**params, "page_size": 1}, template)
        assert page["previous"] is None, template
        walked, pages = [], [page]
        while True:
            assert len(page["results"]) == 1, template
            walked += [_key(item) for item in page["results"]]
            if page["next"] is None:
                break
            page = _get(agent, _relative(page["next"], path), None, template)
            pages.append(page)
        assert walked == expected, template

        if template in FORWARD_ONLY:
            assert all(p["previous"] is None for p in pages), template
            continue
        back = []
        while page["previous"] is not None:
            page = _get(agent, _relative(page["previous"], path), None, template)
            back = [_key(item) for item in page["results"]] + back
        assert back == expected[:-1], template


def _forged(position: str) -> str:
    return base64.b64encode(f"o=0&p={position}".encode()).decode()


def test_every_listing_refuses_a_page_size_out_of_bounds_and_a_damaged_cursor(seeded):
    agent, paths = seeded
    for template in sorted(LISTINGS):
        path, params = paths[template]
        for page_size in ("0", "501", "ten"):
            problem = assert_problem(agent.get(path, {**params, "page_size": page_size}), 400)
            assert set(problem["errors"]) == {"page_size"}, template
        problem = assert_problem(agent.get(path, {**params, "cursor": "not-a-cursor"}), 400)
        assert set(problem["errors"]) == {"cursor"}, template
    # A cursor the server never issued, its position not of the ordering's type: the same 400,
    # not a database error.
    for path in ("/api/v1/records", "/api/v1/audit-events", "/api/v1/evaluation/runs"):
        problem = assert_problem(agent.get(path, {"cursor": _forged("yesterday")}), 400)
        assert set(problem["errors"]) == {"cursor"}, path
