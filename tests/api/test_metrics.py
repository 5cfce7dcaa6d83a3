"""GET /metrics (who may scrape, the families and their labels), the request log's line and
the outbox relay's silence while it has nothing to do."""

from __future__ import annotations

import json
import logging
from ipaddress import ip_network
from typing import Any

import pytest
from celery.app import trace
from django.test import Client, override_settings
from prometheus_client.parser import text_string_to_metric_families

from apps.derivations.embeddings import embeddings_drain
from apps.work.tasks import outbox_relay_all
from memoryconsole.log_filters import OUTBOX_RELAY_TASK
from memoryconsole.request_log import JsonFormatter, PlainFormatter
from tests.records.factories import body

pytestmark = pytest.mark.django_db

TOKEN = "metrics-token-0123456789abcdef"


def scrape(client: Client | None = None, **extra: Any) -> dict[str, Any]:
    response = (client or Client()).get("/metrics", **extra)
    assert response.status_code == 200, response.content[:300]
    assert response["Cache-Control"].startswith("max-age=0")
    return {family.name: family for family in text_string_to_metric_families(response.text)}


def value(families: dict[str, Any], sample: str, **labels: str) -> float:
    """The one sample named ``sample`` with exactly ``labels``."""
    [found] = [
        s.value
        for family in families.values()
        for s in family.samples
        if s.name == sample and s.labels == labels
    ]
    return float(found)


def test_it_serves_the_families_with_route_patterns_for_labels(agent, tenant):
    written = agent.post("/api/v1/records", body(subject="user:patient-4711"))
    assert written.status_code == 201, written.json()
    record_id = written.json()["id"]
    assert agent.get(f"/api/v1/records/{record_id}/history").status_code == 200
    nothing = agent.post("/api/v1/search", {"query": "carrier", "subject": "user:nobody"})
    assert nothing.json()["abstention"]["reason"] == "nothing_in_scope"

    before = scrape()
    assert value(before, "memoryconsole_outbox_waiting") >= 1
    embeddings_drain(tenant.pk)
    families = scrape()
    text = Client().get("/metrics").text

    assert families["memoryconsole_http_requests"].type == "counter"
    route = "api/v1/records/<str:record_id>/history"
    requests = "memoryconsole_http_requests_total"
    assert value(families, requests, route=route, method="GET", status="200") >= 1
    created = value(families, requests, route="api/v1/records", method="POST", status="201")
    assert created >= 1
    duration = families["memoryconsole_http_request_duration_seconds"]
    assert duration.type == "histogram"
    assert {s.labels.get("route") for s in duration.samples} >= {route, "api/v1/search"}
    assert {"route", "method"} == set(duration.samples[0].labels) - {"le"}
    # Labels are patterns: neither the record's id nor its subject reaches a scraper.
    assert record_id not in text
    assert "patient-4711" not in text

    abstentions = "memoryconsole_search_abstentions_total"
    assert value(families, abstentions, reason="nothing_in_scope") >= 1
    drained = "memoryconsole_embedding_rows_total"
    assert value(families, drained, outcome="finished") >= 1

    gauges = (
        "memoryconsole_database_up",
        "memoryconsole_outbox_waiting",
        "memoryconsole_outbox_oldest_waiting_seconds",
        "memoryconsole_outbox_finished_last_minute",
        "memoryconsole_outbox_dead",
        "memoryconsole_conflicts_open",
        "memoryconsole_review_queue",
        "memoryconsole_erasure_jobs",
    )
    assert all(families[name].type == "gauge" for name in gauges)
    assert value(families, "memoryconsole_database_up") == 1
    assert value(families, "memoryconsole_outbox_waiting") == 0
    finished = "memoryconsole_outbox_finished_last_minute"
    assert value(families, finished) >= 1
    states = {s.labels["state"] for s in families["memoryconsole_erasure_jobs"].samples}
    assert states == {"queued", "running", "done", "failed"}


def test_it_answers_a_scraper_without_the_token_as_an_unknown_url(agent):
    outside = {"REMOTE_ADDR": "203.0.113.7"}
    unknown = Client().get("/no-such-page", **outside)  # the console's page: nothing here
    with override_settings(METRICS_TOKEN="", METRICS_ALLOW=[]):
        refused = Client().get("/metrics")  # loopback, but no network is allowed
        assert refused.status_code == 404
    with override_settings(METRICS_TOKEN=TOKEN):
        for authorization in ("", f"Bearer {TOKEN[:-1]}", f"Basic {TOKEN}", TOKEN):
            refused = Client().get("/metrics", HTTP_AUTHORIZATION=authorization, **outside)
            assert refused.status_code == 404
            assert refused["Content-Type"] == unknown["Content-Type"]
            assert b"<h1>Not found</h1>" in refused.content
        # An agent's credential is no metrics token.
        as_agent = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {agent.token}", **outside)
        assert as_agent.status_code == 404
        assert scrape(HTTP_AUTHORIZATION=f"Bearer {TOKEN}", **outside)
        # Loopback is allowed by default (this instance is not served beyond this machine).
        assert scrape()
    with override_settings(METRICS_ALLOW=[ip_network("203.0.113.0/24")]):
        assert scrape(**outside)
        assert Client().get("/metrics", REMOTE_ADDR="198.51.100.1").status_code == 404
        assert Client().post("/metrics", **outside).status_code == 405


def test_it_logs_one_json_line_per_request_without_content(agent, tenant, caplog):
    caplog.set_level(logging.INFO, logger="memoryconsole.request")
    response = agent.get(
        "/api/v1/facts?subject=user:patient-4711&domain=diabetes",
        headers={"X-Request-ID": "abc-123"},
    )
    assert response.status_code == 200
    assert response["X-Request-ID"] == "abc-123"
    [record] = [r for r in caplog.records if r.name == "memoryconsole.request"]
    line = JsonFormatter().format(record)
    assert "\n" not in line
    assert "patient-4711" not in line
    assert "diabetes" not in line
    logged = json.loads(line)
    assert set(logged) == {
        "time",
        "level",
        "logger",
        "message",
        "request_id",
        "method",
        "route",
        "status",
        "duration_ms",
        "tenant",
        "credential",
    }
    assert logged["request_id"] == "abc-123"
    assert (logged["method"], logged["route"], logged["status"]) == ("GET", "api/v1/facts", 200)
    assert logged["tenant"] == str(tenant.pk)
    assert logged["credential"] == agent.credential.name
    assert isinstance(logged["duration_ms"], float)
    plain = PlainFormatter("%(levelname)s %(name)s: %(message)s").format(record)
    assert plain.startswith("INFO memoryconsole.request: GET api/v1/facts 200 request_id=abc-123")

    # A request id that is not a plain token is replaced; an unrouted path is no label.
    caplog.clear()
    refused = Client().get("/nowhere/12345", headers={"X-Request-ID": "a b\nforged"})
    generated = refused["X-Request-ID"]
    assert len(generated) == 32
    [record] = [r for r in caplog.records if r.name == "memoryconsole.request"]
    logged = json.loads(JsonFormatter().format(record))
    assert logged["request_id"] == generated
    assert (logged["route"], logged["status"], logged["tenant"]) == ("(unrouted)", 404, None)


def test_the_outbox_relay_logs_only_when_it_had_work(caplog):
    assert outbox_relay_all.name == OUTBOX_RELAY_TASK
    caplog.set_level(logging.INFO)
    beat = logging.getLogger("celery.beat")
    received = logging.getLogger("celery.worker.strategy")

    def relay_ran(result: str, name: str = OUTBOX_RELAY_TASK) -> None:
        context = {"id": "t-1", "name": name, "args": "()", "kwargs": "{}", "eta": None}
        received.info(trace.LOG_RECEIVED, context, extra={"data": context})
        success = {**context, "return_value": result, "runtime": 0.01}
        trace.info(trace.LOG_SUCCESS, success)

    beat.info("Scheduler: Sending due task %s (%s)", "relay-outbox", OUTBOX_RELAY_TASK)
    relay_ran("0")
    assert caplog.records == []

    relay_ran("3")
    beat.info("Scheduler: Sending due task %s (%s)", "reclaim-deleted", "derivations.reclaim")
    relay_ran("0", name="derivations.reclaim")
    beat.warning("Couldn't apply scheduled task %s", "relay-outbox")
    messages = [r.getMessage() for r in caplog.records]
    assert messages == [
        f"Task {OUTBOX_RELAY_TASK}[t-1] succeeded in 0.01s: 3",
        "Scheduler: Sending due task reclaim-deleted (derivations.reclaim)",
        "Task derivations.reclaim[t-1] received",
        "Task derivations.reclaim[t-1] succeeded in 0.01s: 0",
        "Couldn't apply scheduled task relay-outbox",
    ]
