"""``/api/v1/facts`` over time: what is stale and why (``facts/check``), and what the memory
held at a moment (``as_of``), for facts and for search alike."""

from __future__ import annotations

import time
import uuid
from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from apps.records.models import MemoryRecord
from apps.tenancy.context import tenant_scope
from tests.conftest import make_agent

from .support import FACTS, RECORDS, expire, write_ok

pytestmark = pytest.mark.django_db

CHECK = f"{FACTS}/check"


def rfc3339(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def check(agent, *ids: str) -> dict:
    response = agent.post(CHECK, {"facts": [{"id": pk} for pk in ids]})
    assert response.status_code == 200, response.content[:500]
    return response.json()


def conflict(agent):
    first = write_ok(agent)
    second = write_ok(agent, value="carrier_b", source__ref="interaction:5000")
    assert second["outcome"] == "conflict"
    return first, second


def resolve(reviewer, conflict_id: str, resolution: str) -> None:
    response = reviewer.post(
        f"/api/v1/conflicts/{conflict_id}/resolve",
        {"resolution": resolution, "reason": "checked with the customer"},
    )
    assert response.status_code == 200, response.content[:500]


def expire_after(tenant, record_id: str, moment: datetime) -> None:
    """End a record's lifetime just after ``moment`` and wait until that is in the past."""
    with tenant_scope(tenant.pk):
        MemoryRecord.objects.filter(pk=record_id).update(expires_at=moment + timedelta(0, 0, 1))
    while timezone.now() <= moment + timedelta(milliseconds=2):
        time.sleep(0.001)


def facts_as_of(agent, moment: datetime, subject: str = "user:8812") -> dict:
    response = agent.get(FACTS, {"subject": subject, "as_of": rfc3339(moment)})
    assert response.status_code == 200, response.content[:500]
    return response.json()


# --- facts/check: stale, and why ---------------------------------------------------------------


def test_it_reports_an_expired_fact_as_stale(agent, tenant):
    record = write_ok(agent)
    expire(tenant, record["id"])
    body = check(agent, record["id"])
    [result] = body["facts"]
    assert (result["found"], result["current"], result["stale"]) == (True, False, True)
    assert result["reason"] == "expired"
    assert body["stale"] == 1


def test_it_names_the_version_written_after_an_expired_one(agent, tenant):
    first = write_ok(agent)
    expire(tenant, first["id"])
    second = write_ok(agent, value="carrier_b", source__ref="interaction:7000")
    [result] = check(agent, first["id"])["facts"]
    assert result["reason"] == "expired"
    assert (result["current_id"], result["current_version"]) == (second["id"], 2)


def test_it_says_a_superseded_fact_is_stale_because_superseded(agent, review_agent):
    first, second = conflict(agent)
    resolve(review_agent, second["conflict"], "accept_new")
    [result] = check(agent, first["id"])["facts"]
    assert result["stale"] is True
    assert result["reason"] == "superseded"
    assert result["current_id"] == second["id"]


def test_it_reports_a_redacted_fact_as_stale(agent, delete_agent):
    record = write_ok(agent, value={"carrier": "alpha", "address": "1 Main St"})
    response = delete_agent.post(
        f"{RECORDS}/{record['id']}/redact", {"fields": ["address"], "reason": "customer asked"}
    )
    assert response.status_code == 200, response.content[:500]
    [result] = check(agent, record["id"])["facts"]
    assert (result["found"], result["stale"], result["reason"]) == (True, True, "redacted")


def test_it_reports_a_deleted_fact_as_stale_from_its_receipt(agent, delete_agent):
    record = write_ok(agent)
    receipt = delete_agent.delete(f"{RECORDS}/{record['id']}").json()
    body = check(agent, record["id"])
    [result] = body["facts"]
    assert (result["found"], result["current"], result["stale"]) == (False, False, True)
    assert result["reason"] == "deleted"
    assert result["deletion_receipt"] == receipt["id"]
    assert result["current_id"] is None
    assert body["stale"] == 1


def test_a_current_fact_has_no_reason(agent):
    record = write_ok(agent)
    [result] = check(agent, record["id"])["facts"]
    assert (result["found"], result["current"], result["stale"]) == (True, True, False)
    assert result["reason"] is None


def test_another_tenants_deleted_fact_looks_like_one_that_never_existed(
    agent, other_tenant, tenant
):
    other_writer = make_agent(other_tenant, "read,write,delete", name="elsewhere")
    theirs = write_ok(other_writer)
    assert other_writer.delete(f"{RECORDS}/{theirs['id']}").status_code == 200
    never = str(uuid.uuid4())
    body = check(agent, theirs["id"], never)
    deleted_elsewhere, unknown = body["facts"]
    assert deleted_elsewhere["found"] is False
    assert deleted_elsewhere["stale"] is False
    assert {k: v for k, v in deleted_elsewhere.items() if k != "id"} == {
        k: v for k, v in unknown.items() if k != "id"
    }
    assert unknown["detail"]
    assert body["stale"] == 0


# --- as_of: what the memory held then ------------------------------------------------------------


def test_as_of_returns_a_version_that_has_expired_since(agent, tenant):
    record = write_ok(agent)
    then = timezone.now()
    before_expiry = facts_as_of(agent, then)["results"]
    expire_after(tenant, record["id"], then)
    after_expiry = facts_as_of(agent, then)["results"]
    assert [f["id"] for f in before_expiry] == [record["id"]]
    # The same answer, but for the lifetime that has since ended.
    assert [{**f, "expires_at": None} for f in after_expiry] == [
        {**f, "expires_at": None} for f in before_expiry
    ]
    assert agent.get(FACTS, {"subject": "user:8812"}).json()["results"] == []


def test_as_of_leaves_out_what_had_expired_by_then(agent, tenant):
    record = write_ok(agent)
    expire_after(tenant, record["id"], timezone.now())
    assert facts_as_of(agent, timezone.now())["results"] == []


def test_as_of_names_the_receipt_of_a_deletion_since(agent, delete_agent):
    record = write_ok(agent)
    kept = write_ok(agent, key="language", value="de", source__ref="interaction:2")
    then = timezone.now()
    receipt = delete_agent.delete(f"{RECORDS}/{record['id']}").json()
    body = facts_as_of(agent, then)
    assert [f["id"] for f in body["results"]] == [kept["id"]]
    assert body["deletions"] == [receipt["id"]]


def test_as_of_names_no_receipt_for_a_deletion_before_the_time(agent, delete_agent):
    record = write_ok(agent)
    delete_agent.delete(f"{RECORDS}/{record['id']}")
    assert facts_as_of(agent, timezone.now())["deletions"] == []


def test_as_of_names_no_receipt_for_records_written_after_the_time(agent, delete_agent):
    then = timezone.now()
    record = write_ok(agent)
    delete_agent.delete(f"{RECORDS}/{record['id']}")
    assert facts_as_of(agent, then)["deletions"] == []


def test_as_of_names_no_receipt_of_another_subject(agent, delete_agent):
    record = write_ok(agent, subject="user:1")
    then = timezone.now()
    delete_agent.delete(f"{RECORDS}/{record['id']}")
    assert facts_as_of(agent, then)["deletions"] == []
    assert facts_as_of(agent, then, subject="user:1")["deletions"] != []


def test_search_as_of_finds_a_version_that_has_expired_since(agent, tenant):
    record = write_ok(agent, value="ships with carrier alpha")
    then = timezone.now()
    expire_after(tenant, record["id"], then)
    response = agent.post("/api/v1/search", {"query": "carrier alpha", "as_of": rfc3339(then)})
    assert response.status_code == 200, response.content[:500]
    assert [hit["record"]["id"] for hit in response.json()["results"]] == [record["id"]]
    now = agent.post("/api/v1/search", {"query": "carrier alpha"})
    assert now.json()["results"] == []


def test_search_as_of_before_a_resolution_finds_the_value_current_then(agent, review_agent):
    first, second = conflict(agent)
    then = timezone.now()
    resolve(review_agent, second["conflict"], "accept_new")
    response = agent.post("/api/v1/search", {"query": "carrier", "as_of": rfc3339(then)})
    assert [hit["record"]["id"] for hit in response.json()["results"]] == [first["id"]]
