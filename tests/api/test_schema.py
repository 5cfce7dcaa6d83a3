"""The OpenAPI schema, the Swagger UI page, and the health endpoint."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
import yaml
from django.core.management import call_command
from django.db import OperationalError
from django.test import Client
from django.utils import timezone

from memoryconsole import health
from memoryconsole.scheduled import scheduled_run_succeeded, scheduled_runs_expect

from .support import PROBLEM, assert_problem

pytestmark = pytest.mark.django_db


# --- schema ------------------------------------------------------------------------------------


def test_it_generates_a_valid_schema_without_warnings(tmp_path):
    target = tmp_path / "schema.yml"
    # --fail-on-warn turns every drf-spectacular warning (and error) into a failure.
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(target))
    schema = yaml.safe_load(target.read_text())
    assert schema["openapi"].startswith("3.")
    assert "/api/v1/audit-events" in schema["paths"]


@pytest.fixture
def schema():
    response = Client().get("/api/schema/", headers={"Accept": "application/json"})
    assert response.status_code == 200
    return response.json()


def test_it_serves_the_schema_without_credentials(schema):
    assert schema["info"]["title"] == "Memory Console API"
    assert schema["components"]["securitySchemes"]["agentCredential"]["scheme"] == "bearer"


def test_it_documents_problems_as_one_reusable_component(schema):
    problem = schema["components"]["schemas"]["Problem"]
    assert set(problem["required"]) == {"type", "title", "status", "detail"}
    assert "errors" in problem["properties"]


def test_it_documents_every_error_response_as_a_problem(schema):
    errors = 0
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            for code, response in operation["responses"].items():
                if int(code) < 400:
                    continue
                errors += 1
                content = response.get("content", {})
                assert list(content) == [PROBLEM], (path, method, code)
                # A retry's tombstone is a problem with members of its own (and only a 410), and
                # so is readiness's 503, which carries the health report.
                name = "IdempotencyTombstone" if code == "410" else "Problem"
                if (path, code) == ("/api/v1/health/ready", "503"):
                    name = "DegradedProblem"
                assert content[PROBLEM]["schema"] == {"$ref": f"#/components/schemas/{name}"}
    assert errors
    components = schema["components"]["schemas"]
    problem, tombstone = components["Problem"], components["IdempotencyTombstone"]
    assert set(tombstone["properties"]) >= set(problem["properties"])
    assert set(tombstone["required"]) == {*problem["required"], "id", "state", "first_status"}
    degraded = components["DegradedProblem"]
    assert set(degraded["properties"]) == {*problem["properties"], "reasons", "health"}
    assert set(degraded["required"]) == set(problem["required"])


def test_it_documents_the_tombstone_of_every_replayed_write_and_no_other(schema):
    """A retry of a stored response may meet a tombstone (410); a search or a fact check,
    which store no response, never does."""
    for path, method in [
        ("/api/v1/records", "post"),
        ("/api/v1/summaries", "post"),
        ("/api/v1/runs/{run_id}/episodes", "post"),
        ("/api/v1/conflicts/{conflict_id}/resolve", "post"),
    ]:
        response = schema["paths"][path][method]["responses"]["410"]
        assert set(response["headers"]) == {"Idempotent-Replayed", "Idempotent-Tombstone"}
    for path in ("/api/v1/search", "/api/v1/facts/check"):
        assert "410" not in schema["paths"][path]["post"]["responses"]


def test_it_documents_the_audit_events_contract(schema):
    listing = schema["paths"]["/api/v1/audit-events"]["get"]
    params = {p["name"] for p in listing["parameters"]}
    assert {"record", "action", "actor", "since", "cursor"} <= params
    assert {"400", "401", "403"} <= set(listing["responses"])
    detail = schema["paths"]["/api/v1/audit-events/{event_id}"]["get"]
    assert {"401", "403", "404"} <= set(detail["responses"])
    assert detail["parameters"][0]["schema"]["format"] == "uuid"


def test_it_documents_health_without_auth(schema):
    for path in ("/api/v1/health", "/api/v1/health/ready", "/api/v1/health/live"):
        operation = schema["paths"][path]["get"]
        assert not operation.get("security"), path
        assert "401" not in operation["responses"], path
    ready = schema["paths"]["/api/v1/health/ready"]["get"]["responses"]["503"]
    assert "degraded" in ready["description"]
    assert ready["content"]["application/problem+json"]["schema"]["$ref"].endswith(
        "/DegradedProblem"
    )


# --- Swagger UI ---------------------------------------------------------------------------------


def test_it_renders_swagger_ui_from_local_assets_only():
    response = Client().get("/api/docs/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "SwaggerUIBundle" in html
    assert not re.findall(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", html)
    assert "validator.swagger.io" not in html
    assert '"validatorUrl": null' in html
    assets = re.findall(r"""(?:src|href)="(/static/[^"]+)""", html)
    assert any(a.endswith(".js") for a in assets)
    assert any(a.endswith(".css") for a in assets)
    for asset in assets:
        served = Client().get(asset)
        assert served.status_code == 200, asset


# --- health -------------------------------------------------------------------------------------


def test_it_reports_health_without_credentials(monkeypatch):
    response = Client().get("/api/v1/health")
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {
        "status",
        "reasons",
        "database",
        "vector",
        "broker",
        "work",
        "scheduled",
        "replicas",
    }
    assert body["database"] == "ok"
    assert body["replicas"] == []  # none configured (DATABASE_REPLICA_URLS)
    assert re.fullmatch(r"\d+\.\d+(\.\d+)?", body["vector"])
    assert body["broker"].startswith(("ok", "unreachable"))


def test_it_ignores_credentials_on_health():
    response = Client().get("/api/v1/health", headers={"Authorization": "Bearer mc_garbage"})
    assert response.status_code == 200


def test_it_answers_503_when_the_database_is_down(monkeypatch):
    class DownConnection:
        def cursor(self):
            raise OperationalError("connection refused")

    monkeypatch.setattr(health, "connection", DownConnection())
    body = assert_problem(Client().get("/api/v1/health"), 503)
    assert "database" in body["detail"]


def _outbox_row(tenant, *, age: timedelta, state: str = "pending") -> None:
    from tests.factories import OutboxMessageFactory

    OutboxMessageFactory(tenant=tenant, created_at=timezone.now() - age, state=state)


def test_it_reports_health_ok_while_background_work_completes(tenant, settings):
    settings.WORK_STALLED_AFTER = 120
    _outbox_row(tenant, age=timedelta(seconds=5))
    body = Client().get("/api/v1/health").json()
    assert body["work"]["waiting"] == 1
    if body["broker"].startswith("ok"):
        assert body["status"] == "ok"
        assert body["reasons"] == []


def test_it_reports_degraded_health_when_work_waits_too_long(tenant, other_tenant, settings):
    settings.WORK_STALLED_AFTER = 120
    _outbox_row(tenant, age=timedelta(seconds=30))
    _outbox_row(other_tenant, age=timedelta(minutes=10), state="published")
    response = Client().get("/api/v1/health")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "degraded"
    assert body["work"]["waiting"] == 2
    assert body["work"]["oldest_waiting_seconds"] >= 600
    assert any("not completing" in reason for reason in body["reasons"])


def test_it_reports_degraded_health_when_work_died(tenant, monkeypatch):
    monkeypatch.setattr(health, "broker_status", lambda: "ok (stub)")
    ready = Client().get("/api/v1/health/ready")
    assert ready.status_code == 200
    assert ready.json() == Client().get("/api/v1/health").json()

    _outbox_row(tenant, age=timedelta(seconds=1), state="dead")
    response = Client().get("/api/v1/health")
    # /api/v1/health reports, whatever it finds; readiness says it with its status code.
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "degraded"
    assert body["work"]["dead"] == 1
    problem = assert_problem(Client().get("/api/v1/health/ready"), 503)
    assert problem["type"].endswith("/problems/degraded")
    assert problem["reasons"] == body["reasons"]
    assert problem["detail"] == "Degraded: " + " ".join(body["reasons"])
    assert problem["health"] == body


def test_it_answers_liveness_over_plain_http_behind_a_tls_proxy(settings):
    settings.SECURE_SSL_REDIRECT = True
    assert Client().get("/api/v1/health/live").json() == {"status": "alive"}
    assert Client().get("/api/v1/health/ready").status_code in {200, 503}
    assert Client().get("/api/v1/me").status_code == 301  # everything else is redirected
    with_body = Client().generic("GET", "/api/v1/health/live", "x", content_type="text/plain")
    assert_problem(with_body, 400)


def test_it_reports_degraded_health_while_scheduled_work_is_not_completing(settings):
    settings.WORK_STALLED_AFTER = 120
    now = timezone.now()
    scheduled_runs_expect(now - timedelta(minutes=8))  # beat started 8 minutes ago
    scheduled_run_succeeded("derivations.outbox_relay", now - timedelta(minutes=5))
    scheduled_run_succeeded("derivations.reclaim", now - timedelta(minutes=5))
    body = Client().get("/api/v1/health").json()
    assert body["status"] == "degraded"
    [reason] = [r for r in body["reasons"] if r.startswith("Scheduled work is not completing")]
    # Every 2 s: overdue 122 s after its last success. Every 10 minutes: not yet, at 5.
    assert "relay-outbox (every 2 s, limit 122 s) last succeeded 300 s ago" in reason
    assert "reclaim-deleted" not in reason
    # Every 15 minutes and never succeeded: overdue 30 minutes after beat scheduled it.
    assert "compact-expired-records" not in reason
    scheduled = {each["name"]: each for each in body["scheduled"]}
    assert scheduled["relay-outbox"]["overdue"] is True
    assert scheduled["reclaim-deleted"]["last_succeeded_seconds_ago"] >= 300
    assert scheduled["compact-expired-records"]["last_succeeded_seconds_ago"] is None

    scheduled_run_succeeded("derivations.outbox_relay")
    body = Client().get("/api/v1/health").json()
    assert not any(r.startswith("Scheduled work") for r in body["reasons"])


def test_it_reports_a_scheduled_task_that_never_succeeded(settings):
    settings.WORK_STALLED_AFTER = 120
    scheduled_runs_expect(timezone.now() - timedelta(minutes=31))
    scheduled_run_succeeded("derivations.outbox_relay")
    body = Client().get("/api/v1/health").json()
    [reason] = [r for r in body["reasons"] if r.startswith("Scheduled work is not completing")]
    assert (
        "compact-expired-records (every 900 s, limit 1800 s) has not succeeded in the 1860 s "
        "since beat scheduled it" in reason
    )
