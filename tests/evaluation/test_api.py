"""``GET /api/v1/evaluation/decisions-at-risk`` and the runs: contract, paging, isolation."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from apps.records.models import Conflict, MemoryRecord, PromotionRequest
from apps.review.services import conflict_resolve, promotion_return_to_provisional
from apps.tenancy.context import tenant_scope
from tests.factories import EvaluationRunFactory
from tests.records.factories import body

from .support import REVIEWER, decide, remember

pytestmark = pytest.mark.django_db

AT_RISK = "/api/v1/evaluation/decisions-at-risk"


def listed(agent: Any, **params: Any) -> Any:
    response = agent.get(AT_RISK, params)
    assert response.status_code == 200, response.content
    return response.json()


def changes_of(page: dict[str, Any]) -> dict[str, list[str]]:
    return {item["memory"]["id"]: [c["kind"] for c in item["changes"]] for item in page["results"]}


def test_it_names_every_kind_of_change_after_the_decision(writer, tenant):
    ids = {
        kind: remember(writer, tenant, f"{kind}.preference")
        for kind in (
            "superseded",
            "deleted",
            "redacted",
            "expired",
            "in_conflict",
            "unconfirmed",
            "unchanged",
        )
    }
    returned = decide(writer, "preference")
    assert set(ids.values()) <= set(returned)
    # Superseded: a new value, accepted by a reviewer.
    newer = writer.post(
        "/api/v1/records", body(key="superseded.preference", subject="user:1", value="carrier_b")
    ).json()
    with tenant_scope(tenant.pk):
        conflict_resolve(
            conflict=Conflict.objects.get(pk=newer["conflict"]),
            actor=REVIEWER,
            resolution="accept_new",
            reason="newer holds",
        )
    writer.post(
        "/api/v1/records", body(key="in_conflict.preference", subject="user:1", value="carrier_z")
    )
    assert writer.delete(f"/api/v1/records/{ids['deleted']}").status_code == 200
    assert (
        writer.post(
            f"/api/v1/records/{ids['redacted']}/redact", {"fields": [""], "reason": "asked"}
        ).status_code
        == 200
    )
    with tenant_scope(tenant.pk):
        # Its lifetime ends now, after the decision (an earlier end would precede it).
        MemoryRecord.objects.filter(pk=ids["expired"]).update(expires_at=timezone.now())
        request = PromotionRequest.objects.get(record_id=ids["unconfirmed"])
        promotion_return_to_provisional(request=request, actor=REVIEWER, reason="a mistake")

    page = listed(writer)
    found = changes_of(page)
    assert found == {
        ids["superseded"]: ["superseded"],
        ids["deleted"]: ["deleted"],
        ids["redacted"]: ["redacted"],
        ids["expired"]: ["expired"],
        ids["in_conflict"]: ["in_conflict"],
        ids["unconfirmed"]: ["unconfirmed"],
    }
    item = next(i for i in page["results"] if i["memory"]["id"] == ids["superseded"])
    assert item["changes"][0]["superseded_by"] == newer["id"]
    assert item["credential"] == {"id": str(writer.credential.pk), "label": "writer"}
    assert item["memory"]["subject"] == "user:1"
    gone = next(i for i in page["results"] if i["memory"]["id"] == ids["deleted"])
    assert gone["memory"]["subject"] is None  # the receipt says what went, never the content
    assert gone["changes"][0]["receipt_kind"] == "record"
    assert gone["changes"][0]["receipt"]
    assert item["searched_at"] < item["changes"][0]["at"]


def test_a_change_before_the_decision_puts_nothing_at_risk(writer, tenant):
    first = remember(writer, tenant, "a.preference")
    writer.post("/api/v1/records", body(key="a.preference", subject="user:1", value="carrier_b"))
    assert first in decide(writer, "preference")  # the current value holds until reviewed
    assert listed(writer)["results"] == []
    context = writer.post(
        "/api/v1/search", {"query": "preference", "subject": "user:1"}
    )  # a context search is not a decision
    assert context.status_code == 200
    assert writer.delete(f"/api/v1/records/{first}").status_code == 200
    assert list(changes_of(listed(writer))) == [first]


def test_it_pages_with_a_cursor_and_filters(writer, tenant, other_agent):
    one = remember(writer, tenant, "one.preference")
    two = remember(writer, tenant, "two.preference")
    decide(writer, "preference")
    decide(writer, "preference")
    writer.delete(f"/api/v1/records/{one}")
    writer.delete(f"/api/v1/records/{two}")
    everything = listed(writer)["results"]
    assert len(everything) == 4  # two searches, two memories each
    seen, page = [], listed(writer, page_size=1)
    while True:
        seen += page["results"]
        if not page["next"]:
            break
        response = writer.client.get(page["next"], headers=writer._headers(None))
        assert response.status_code == 200
        page = response.json()
    assert seen == everything
    assert {i["memory"]["id"] for i in listed(writer, memory=one)["results"]} == {one}
    assert listed(writer, change="superseded")["results"] == []
    assert len(listed(writer, credential=str(writer.credential.pk))["results"]) == 4
    assert listed(writer, credential=str(other_agent.credential.pk))["results"] == []
    later = (timezone.now() + timedelta(minutes=1)).isoformat()
    assert listed(writer, since=later)["results"] == []
    assert len(listed(writer, until=later)["results"]) == 4


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"change": "forgotten"}, "change"),
        ({"memory": "not-a-uuid"}, "memory"),
        ({"since": "2025-01-01T00:00:00"}, "since"),
        ({"page_size": "0"}, "page_size"),
        ({"cursor": "garbage"}, "cursor"),
        ({"chnage": "deleted"}, "chnage"),
    ],
)
def test_bad_input_is_a_problem_naming_it(writer, params, field):
    response = writer.get(AT_RISK, params)
    assert response.status_code == 400
    assert response["Content-Type"].startswith("application/problem+json")
    assert field in response.json()["errors"]


def test_it_needs_the_audit_action_and_a_credential(agent, client):
    assert agent.get(AT_RISK).status_code == 403
    assert client.get(AT_RISK).status_code == 401


def test_another_tenants_decisions_and_runs_stay_invisible(
    writer, tenant, other_agent, other_tenant
):
    mine = remember(writer, tenant, "mine.preference")
    decide(writer, "preference")
    writer.delete(f"/api/v1/records/{mine}")
    assert listed(other_agent)["results"] == []
    assert listed(other_agent, memory=mine)["results"] == []
    run = EvaluationRunFactory(tenant=tenant)
    assert writer.get(f"/api/v1/evaluation/runs/{run.pk}").status_code == 200
    assert other_agent.get(f"/api/v1/evaluation/runs/{run.pk}").status_code == 404
    assert other_agent.get("/api/v1/evaluation/runs/not-an-id").status_code == 404
    assert other_agent.get("/api/v1/evaluation/runs").json()["results"] == []
    assert [r["id"] for r in writer.get("/api/v1/evaluation/runs").json()["results"]] == [
        str(run.pk)
    ]


def test_it_shows_a_runs_scenario_set_by_name_never_by_its_path(writer, tenant):
    # Runs started from the command line before stored the file's path.
    run = EvaluationRunFactory(tenant=tenant, scenario_set="/srv/ops/scenarios/quarterly.json")
    listed_runs = writer.get("/api/v1/evaluation/runs").json()["results"]
    assert [r["scenario_set"] for r in listed_runs] == ["quarterly"]
    detail = writer.get(f"/api/v1/evaluation/runs/{run.pk}").json()
    assert detail["scenario_set"] == "quarterly"
    assert "/srv" not in json.dumps(listed_runs) + json.dumps(detail)
