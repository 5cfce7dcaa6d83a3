"""One rule for a request that names what the tenant does not have (docs/api.md, "A name that
does not resolve"): a name in the path is a ``404``; a name in the body that the operation must
use is a ``422`` naming it, and changes nothing; a filter naming nothing finds nothing
(``200``); a malformed name is a ``400`` whatever is stored.

Each row is one reference, sent through HTTP against the real database, with a name of each
kind that does not resolve: unknown, another tenant's, and (where the state matters) one
that is no longer usable.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from tests.conftest import make_agent
from tests.factories import ConsentRevocationFactory
from tests.records.factories import body

from .support import assert_problem, footprint, tenant_state_tables

pytestmark = pytest.mark.django_db

EVERY_ACTION = "read,write,search,delete,review,state,erase,audit"
UNKNOWN = str(uuid.uuid4())


@pytest.fixture
def world(tenant, other_tenant):
    """An agent of ``tenant`` with every action, and objects of ``tenant`` and of another."""
    agent = make_agent(tenant, EVERY_ACTION, name="referrer")
    rival = make_agent(other_tenant, EVERY_ACTION, name="rival")

    def made(who: Any, path: str, data: dict[str, Any]) -> dict[str, Any]:
        response = who.post(path, data)
        assert response.status_code in (200, 201), response.content[:300]
        result: dict[str, Any] = response.json()
        return result

    run = {"task_id": "t", "owner": "service:checkout"}
    closed = made(agent, "/api/v1/runs", run)
    made(agent, f"/api/v1/runs/{closed['id']}/close", {})
    obligation = {"task_id": "t", "kind": "charge"}
    ConsentRevocationFactory(tenant=tenant, consent_ref="consent:revoked")
    return {
        "agent": agent,
        "record": made(agent, "/api/v1/records", body(value={"card": "4242"}))["id"],
        "closed_run": closed["id"],
        "rival_run": made(rival, "/api/v1/runs", run)["id"],
        "rival_record": made(rival, "/api/v1/records", body())["id"],
        "rival_obligation": made(rival, "/api/v1/obligations", {**obligation, "key": "r:1"})["id"],
        "rival_episode": made(
            rival,
            f"/api/v1/runs/{made(rival, '/api/v1/runs', run)['id']}/episodes",
            {
                "role": "tool",
                "content": "seen",
            },
        )["id"],
    }


def session_write(run_id: str) -> dict[str, Any]:
    return body(
        source={"kind": "interaction", "ref": "i:1", "run_id": run_id},
        retention={"basis": "session"},
    )


def summary_of(kind: str, source_id: str) -> dict[str, Any]:
    return {"text": "noted", "sources": [{"type": kind, "id": source_id}], "reason": "r"}


def obligation_after(dependency: str) -> dict[str, Any]:
    return {"task_id": "t", "kind": "charge", "key": "k:after", "depends_on": [dependency]}


Request = Callable[[dict[str, Any]], tuple[str, str, dict[str, Any] | None]]

# (name, request built from the world, the status, the member named under ``errors``)
BODY_REFERENCES: list[tuple[str, Request, int, str]] = [
    (
        "session run unknown",
        lambda w: ("post", "/api/v1/records", session_write(UNKNOWN)),
        422,
        "source.run_id",
    ),
    (
        "session run closed",
        lambda w: ("post", "/api/v1/records", session_write(w["closed_run"])),
        422,
        "source.run_id",
    ),
    (
        "session run another tenant's",
        lambda w: ("post", "/api/v1/records", session_write(w["rival_run"])),
        422,
        "source.run_id",
    ),
    (
        "session run malformed",
        lambda w: ("post", "/api/v1/records", session_write("run-7")),
        400,
        "source.run_id",
    ),
    (
        "consent revoked",
        lambda w: (
            "post",
            "/api/v1/records",
            body(retention={"basis": "consent", "consent_ref": "consent:revoked"}),
        ),
        422,
        "retention.consent_ref",
    ),
    (
        "summary source unknown",
        lambda w: ("post", "/api/v1/summaries", summary_of("record", UNKNOWN)),
        422,
        "sources[0].id",
    ),
    (
        "summary source another tenant's",
        lambda w: ("post", "/api/v1/summaries", summary_of("record", w["rival_record"])),
        422,
        "sources[0].id",
    ),
    (
        "summary episode another tenant's",
        lambda w: ("post", "/api/v1/summaries", summary_of("episode", w["rival_episode"])),
        422,
        "sources[0].id",
    ),
    (
        "summary source malformed",
        lambda w: ("post", "/api/v1/summaries", summary_of("record", "nope")),
        400,
        "sources[0].id",
    ),
    (
        "redaction of a part the value lacks",
        lambda w: (
            "post",
            f"/api/v1/records/{w['record']}/redact",
            {"fields": ["address"], "reason": "r"},
        ),
        422,
        "fields[0]",
    ),
    (
        "dependency unknown",
        lambda w: ("post", "/api/v1/obligations", obligation_after(UNKNOWN)),
        422,
        "depends_on",
    ),
    (
        "dependency another tenant's",
        lambda w: ("post", "/api/v1/obligations", obligation_after(w["rival_obligation"])),
        422,
        "depends_on",
    ),
    (
        "dependency malformed",
        lambda w: ("post", "/api/v1/obligations", obligation_after("x")),
        400,
        "depends_on[0]",
    ),
    (
        "cursor never issued",
        lambda w: ("get", "/api/v1/records", {"cursor": "not-a-cursor"}),
        400,
        "cursor",
    ),
]


@pytest.mark.parametrize(
    ("request_of", "status", "member"),
    [pytest.param(r, s, m, id=name) for name, r, s, m in BODY_REFERENCES],
)
def test_a_body_reference_that_does_not_resolve_is_a_422_and_changes_nothing(
    world, tenant, other_tenant, request_of, status, member
):
    agent = world["agent"]
    method, path, data = request_of(world)
    tables = tenant_state_tables()
    before = footprint([tenant.pk, other_tenant.pk], tables)
    response = getattr(agent, method)(path, data)
    problem = assert_problem(response, status)
    assert member in problem["errors"], problem
    assert footprint([tenant.pk, other_tenant.pk], tables) == before


# A name in the path: 404, another tenant's the same as a missing one.
PATH_REFERENCES: list[tuple[str, Request]] = [
    ("record unknown", lambda w: ("get", f"/api/v1/records/{UNKNOWN}", None)),
    ("record another tenant's", lambda w: ("get", f"/api/v1/records/{w['rival_record']}", None)),
    ("run another tenant's", lambda w: ("get", f"/api/v1/runs/{w['rival_run']}", None)),
    (
        "obligation another tenant's",
        lambda w: ("get", f"/api/v1/obligations/{w['rival_obligation']}", None),
    ),
    (
        "episodes of another tenant's run",
        lambda w: (
            "post",
            f"/api/v1/runs/{w['rival_run']}/episodes",
            {"role": "tool", "content": "x"},
        ),
    ),
]

# A filter naming nothing the tenant has: an empty answer, never a refusal.
FILTERS: list[tuple[str, Request, Callable[[Any], Any]]] = [
    (
        "records of a subject",
        lambda w: ("get", "/api/v1/records", {"subject": "user:nobody"}),
        lambda b: b["results"],
    ),
    (
        "facts of a subject",
        lambda w: ("get", "/api/v1/facts", {"subject": "user:nobody"}),
        lambda b: b["results"],
    ),
    (
        "audit events of an object",
        lambda w: ("get", "/api/v1/audit-events", {"record": w["rival_record"]}),
        lambda b: b["results"],
    ),
    (
        "receipts of an erasure",
        lambda w: ("get", "/api/v1/deletion-receipts", {"parent": UNKNOWN}),
        lambda b: b["results"],
    ),
    (
        "decisions at risk of a memory",
        lambda w: ("get", "/api/v1/evaluation/decisions-at-risk", {"memory": w["rival_record"]}),
        lambda b: b["results"],
    ),
    (
        "obligations of a task",
        lambda w: ("get", "/api/v1/obligations", {"task_id": "nobody"}),
        lambda b: b["results"],
    ),
    (
        "search of a subject",
        lambda w: ("post", "/api/v1/search", {"query": "carrier", "subject": "user:nobody"}),
        lambda b: b["results"],
    ),
    (
        "fact check of an unknown id",
        lambda w: ("post", "/api/v1/facts/check", {"facts": [{"id": w["rival_record"]}]}),
        lambda b: [f for f in b["facts"] if f["found"]],
    ),
    (
        "erasure of a subject",
        lambda w: (
            "post",
            "/api/v1/erasures",
            {"subject": "user:nobody", "reason": "r", "dry_run": True},
        ),
        lambda b: [n for n in b["totals"].values() if n],
    ),
]


def test_a_path_reference_that_does_not_resolve_is_a_404(world):
    for name, request_of in PATH_REFERENCES:
        method, path, data = request_of(world)
        assert getattr(world["agent"], method)(path, data).status_code == 404, name


def test_a_filter_naming_nothing_finds_nothing(world):
    for name, request_of, found in FILTERS:
        method, path, data = request_of(world)
        response = getattr(world["agent"], method)(path, data)
        assert response.status_code == 200, (name, response.content[:300])
        assert found(response.json()) == [], name
