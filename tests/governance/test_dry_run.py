"""Dry runs of the destructive calls: what would go, counted and named; nothing changes."""

from __future__ import annotations

import pytest

from apps.records.models import MemoryRecord
from apps.tenancy.context import tenant_scope
from tests.api.support import assert_problem
from tests.derivations.support import RECORDS, summarise, write

pytestmark = pytest.mark.django_db

ERASURES = "/api/v1/erasures"


def test_it_previews_an_erasure_and_changes_nothing(admin_agent, tenant):
    first = write(admin_agent, subject="user:1", key="home", value="12 quince lane")
    write(admin_agent, subject="user:1", key="home", value="v2", source__ref="interaction:9")
    write(admin_agent, subject="user:1", key="phone", value="555")
    write(admin_agent, subject="user:2", key="home", value="elsewhere")
    assert summarise(admin_agent, [first["id"]]).status_code == 201
    response = admin_agent.post(
        ERASURES, {"subject": "user:1", "reason": "GDPR art. 17", "dry_run": True}
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["dry_run"] is True
    assert body["totals"]["facts"] == 2
    assert body["totals"]["records"] == 3
    assert body["totals"]["summaries_invalidated"] == 1
    assert first["id"] in body["record_ids"]
    assert len(body["fact_ids"]) == 2
    assert "receipt" not in body
    with tenant_scope(tenant.pk):
        assert MemoryRecord.objects.filter(subject="user:1").count() == 3
    assert admin_agent.get(f"{RECORDS}/{first['id']}").status_code == 200
    assert admin_agent.get("/api/v1/deletion-receipts").json()["results"] == []


def test_it_previews_a_record_deletion_and_changes_nothing(admin_agent, tenant):
    record = write(admin_agent, subject="user:1", key="home", value="12 quince lane")
    write(admin_agent, subject="user:1", key="home", value="v2", source__ref="interaction:9")
    response = admin_agent.delete(f"{RECORDS}/{record['id']}?dry_run=true")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["dry_run"] is True
    assert body["record"] == record["id"]
    assert body["fact"]
    assert record["id"] in body["record_ids"]
    assert body["counts"]["versions"] == 2
    assert body["held"] is False
    assert admin_agent.get(f"{RECORDS}/{record['id']}").status_code == 200
    assert admin_agent.get("/api/v1/deletion-receipts").json()["results"] == []


def test_it_deletes_when_dry_run_is_false(admin_agent):
    record = write(admin_agent, subject="user:1")
    response = admin_agent.delete(f"{RECORDS}/{record['id']}?dry_run=false")
    assert response.status_code == 200, response.content
    assert admin_agent.get(f"{RECORDS}/{record['id']}").status_code == 404


@pytest.mark.parametrize("value", ["yes", "1", "True", "", "on"])
def test_it_refuses_a_dry_run_that_is_not_true_or_false(admin_agent, value):
    record = write(admin_agent, subject="user:1")
    response = admin_agent.delete(f"{RECORDS}/{record['id']}?dry_run={value}")
    body = assert_problem(response, 400)
    assert "dry_run" in body["errors"]
    assert admin_agent.get(f"{RECORDS}/{record['id']}").status_code == 200


@pytest.mark.parametrize("value", ["true", 1, "yes", None])
def test_it_refuses_an_erasure_dry_run_that_is_not_a_boolean(admin_agent, value):
    write(admin_agent, subject="user:1")
    response = admin_agent.post(ERASURES, {"subject": "user:1", "reason": "r", "dry_run": value})
    body = assert_problem(response, 400)
    assert "dry_run" in body["errors"]
    assert admin_agent.get(RECORDS, {"subject": "user:1"}).json()["results"]


def test_it_refuses_a_misspelt_dry_run_and_erases_nothing(admin_agent):
    write(admin_agent, subject="user:1")
    response = admin_agent.post(ERASURES, {"subject": "user:1", "reason": "r", "dryrun": True})
    body = assert_problem(response, 400)
    assert "dryrun" in body["errors"]
    assert "dryrun" in body["detail"]
    assert admin_agent.get(RECORDS, {"subject": "user:1"}).json()["results"]
    record = write(admin_agent, subject="user:3")
    response = admin_agent.delete(f"{RECORDS}/{record['id']}?dryrun=true")
    assert "dryrun" in assert_problem(response, 400)["errors"]
    assert admin_agent.get(f"{RECORDS}/{record['id']}").status_code == 200
