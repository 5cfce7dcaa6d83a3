"""Retention basis ``session``: a write names an open run of its tenant, lives no longer than
its class allows, and expires when that run closes."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from apps.core.actors import Actor
from apps.governance.services import retention_rule_set
from apps.records.models import MemoryRecord
from apps.tenancy.context import tenant_scope
from tests.api.support import assert_problem
from tests.records.factories import body as record_body

from .support import RUNS, ok, open_run

pytestmark = pytest.mark.django_db


def _session_record(agent: Any, run_id: str, **overrides: Any) -> Any:
    payload = record_body(
        retention={"basis": "session"},
        source__run_id=run_id,
        sensitivity="internal",
        **overrides,
    )
    return agent.post("/api/v1/records", payload)


def test_it_accepts_a_session_write_in_an_open_run(agent):
    run = open_run(agent)
    record = ok(_session_record(agent, run["id"]), 201)
    assert record["source"]["run_id"] == run["id"]


def test_it_requires_a_run_for_a_session_write(agent):
    response = _session_record(agent, None)
    assert set(assert_problem(response, 400)["errors"]) == {"source.run_id"}


def test_it_refuses_a_session_write_naming_a_malformed_run_id(agent):
    body = assert_problem(_session_record(agent, "run-7"), 400)
    assert set(body["errors"]) == {"source.run_id"}


def _not_an_open_run(agent: Any, run_id: str) -> list[str]:
    # A run id, valid as such, naming no open run of the tenant: 422 (a reference that does
    # not resolve), where a malformed one is a 400.
    body = assert_problem(_session_record(agent, run_id), 422)
    assert set(body["errors"]) == {"source.run_id"}
    messages: list[str] = body["errors"]["source.run_id"]
    return messages


def test_it_refuses_a_session_write_naming_no_open_run_of_the_tenant(agent, other_agent, tenant):
    closed = open_run(agent)
    ok(agent.post(f"{RUNS}/{closed['id']}/close"))
    theirs = open_run(other_agent)
    unknown = _not_an_open_run(agent, str(uuid.uuid4()))
    assert _not_an_open_run(agent, closed["id"]) == unknown
    assert _not_an_open_run(agent, theirs["id"]) == unknown
    with tenant_scope(tenant.pk):
        assert not MemoryRecord.objects.exists()


def test_a_session_write_lives_no_longer_than_its_class_allows(agent, tenant):
    with tenant_scope(tenant.pk):
        retention_rule_set(
            tenant=tenant,
            sensitivity="internal",
            provisional_max=timedelta(days=3),
            confirmed_max=None,
            actor=Actor.system("tests"),
        )
    run = open_run(agent)
    record = ok(_session_record(agent, run["id"]), 201)
    expires_at = parse_datetime(record["expires_at"])
    assert expires_at is not None
    assert expires_at <= timezone.now() + timedelta(days=3)


def test_a_session_record_expires_when_its_run_closes(agent, tenant):
    run = open_run(agent)
    record = ok(_session_record(agent, run["id"]), 201)
    closed = ok(agent.post(f"{RUNS}/{run['id']}/close"))
    with tenant_scope(tenant.pk):
        stored = MemoryRecord.objects.get(pk=record["id"])
    assert stored.status == "expired"
    assert stored.expires_at == parse_datetime(closed["closed_at"])
