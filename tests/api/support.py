"""Assertions shared by the API tests."""

from __future__ import annotations

import json
import uuid
from typing import Any

from django.apps import apps as django_apps
from django.db import connection

from apps.audit.models import AuditEvent
from apps.tenancy.context import tenant_scope

PROBLEM = "application/problem+json"
PROBLEM_MEMBERS = {"type", "title", "status", "detail"}


def assert_problem(response: Any, status: int) -> dict[str, Any]:
    """``response`` is an RFC 9457 problem with ``status``; returns its body."""
    assert response.status_code == status, response.content[:500]
    assert response["Content-Type"] == PROBLEM
    body = json.loads(response.content)
    assert set(body) >= PROBLEM_MEMBERS, body
    assert body["status"] == status
    assert body["type"].startswith("https://memoryconsole.dev/problems/")
    assert isinstance(body["title"], str)
    assert body["title"]
    assert isinstance(body["detail"], str)
    assert body["detail"]
    if "errors" in body:
        errors = body["errors"]
        assert isinstance(errors, dict)
        assert errors
        for path, messages in errors.items():
            assert isinstance(path, str)
            assert isinstance(messages, list)
            assert messages
            assert all(isinstance(message, str) for message in messages)
    return body


# --- what a refused request must leave as it was ------------------------------------------------

# A refused request may leave these audit events: the refusal itself is part of the record.
REFUSALS_AUDITED = ("record.write_rejected", "obligation.commit_refused")
STATE_APPS = ("records", "derivations", "state", "audit", "api")


def tenant_state_tables() -> list[str]:
    tables = []
    for label in STATE_APPS:
        for model in django_apps.get_app_config(label).get_models():
            if any(f.name == "tenant" for f in model._meta.concrete_fields):
                tables.append(model._meta.db_table)
    return sorted(tables)


def footprint(tenant_ids: list[Any], tables: list[str]) -> dict[str, str]:
    """A digest of every row each tenant holds in each table, by ``tenant/table``; the audit
    events of refusals aside (and the chain heads, which count every event)."""
    refusals = ", ".join(f"'{action}'" for action in REFUSALS_AUDITED)
    kept = [table for table in tables if table != "audit_auditchainhead"]
    digests = []
    for table in kept:
        where = f" WHERE t.action NOT IN ({refusals})" if table == "audit_auditevent" else ""
        # Table names from the models, constant actions: nothing here comes from a request.
        digests.append(
            f"(SELECT md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) "  # noqa: S608
            f"FROM {table} t{where})"
        )
    statement = "SELECT " + ", ".join(digests)
    found = {}
    for tenant_id in tenant_ids:
        with tenant_scope(tenant_id), connection.cursor() as cursor:
            cursor.execute(statement)
            row = cursor.fetchone()
        found.update(
            {f"{tenant_id}/{table}": digest for table, digest in zip(kept, row, strict=True)}
        )
    return found


def objects_of_every_kind(agent: Any, record: dict[str, Any]) -> dict[str, str]:
    """Real objects of every kind an operation names in its path, written by ``agent`` (holding
    every action) through the API, by the name of the path's parameter; ``record`` is the
    body of the record the others hang on."""

    def ok(response: Any) -> dict[str, Any]:
        assert response.status_code in (200, 201), response.content[:500]
        result: dict[str, Any] = response.json()
        return result

    written = ok(agent.post("/api/v1/records", record))
    contender = ok(agent.post("/api/v1/records", {**record, "value": "carrier_b"}))
    deleted = ok(agent.post("/api/v1/records", {**record, "subject": "user:1", "value": "v"}))
    receipt = ok(agent.delete(f"/api/v1/records/{deleted['id']}"))
    promotion = ok(
        agent.post(f"/api/v1/records/{written['id']}/promotion-requests", {"reason": "seen twice"})
    )
    summary = ok(
        agent.post(
            "/api/v1/summaries",
            {
                "text": "a summary",
                "sources": [{"type": "record", "id": written["id"]}],
                "reason": "r",
            },
        )
    )
    run = ok(agent.post("/api/v1/runs", {"task_id": "task-1", "owner": "service:checkout"}))
    ok(agent.post(f"/api/v1/runs/{run['id']}/checkpoints", {"step": 1, "state": {}}))
    ok(agent.post(f"/api/v1/runs/{run['id']}/episodes", {"role": "user", "content": "hi"}))
    obligation = ok(
        agent.post("/api/v1/obligations", {"task_id": "task-1", "kind": "charge", "key": "k:1"})
    )
    with tenant_scope(agent.tenant.pk):
        event = AuditEvent.objects.order_by("-seq").values_list("pk", flat=True)[0]
    return {
        "record_id": written["id"],
        "id": written["id"],
        "summary_id": summary["id"],
        "run_id": run["id"],
        "obligation_id": obligation["id"],
        "conflict_id": contender["conflict"],
        "request_id": promotion["id"],
        "event_id": str(event),
        "receipt_id": receipt["id"],
        "job_id": str(uuid.uuid4()),  # no erasure job: a large erasure would take a while
        "consent_ref": "consent:1",
    }
