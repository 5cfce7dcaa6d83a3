"""``DELETE /records/{id}`` reads its body: a reason it keeps, anything else it refuses.

The erasure endpoint takes ``dry_run`` in its body, so a client may well send it to a record's
deletion too; that must not delete for real.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from apps.audit.models import DeletionReceipt
from apps.records.models import MemoryRecord
from apps.tenancy.context import tenant_scope
from tests.api.support import assert_problem
from tests.derivations.support import RECORDS, write

pytestmark = pytest.mark.django_db

AUDIT_EVENTS = "/api/v1/audit-events"


def delete(agent: Any, path: str, body: Any, content_type: str = "application/json") -> Any:
    data = json.dumps(body) if not isinstance(body, str | bytes) else body
    return agent.client.delete(
        path,
        data=data,
        content_type=content_type,
        headers={"Authorization": f"Bearer {agent.token}"},
    )


def still_there(tenant: Any, record_id: str) -> bool:
    with tenant_scope(tenant.pk):
        return MemoryRecord.objects.filter(pk=record_id).exists()


def receipts(tenant: Any) -> int:
    with tenant_scope(tenant.pk):
        return DeletionReceipt.objects.count()


def delete_events(agent: Any, record_id: str) -> list[dict[str, Any]]:
    response = agent.get(AUDIT_EVENTS, {"record": record_id, "action": "record.delete"})
    assert response.status_code == 200, response.content
    events: list[dict[str, Any]] = response.json()["results"]
    return events


def test_it_refuses_a_dry_run_in_the_body_and_deletes_nothing(admin_agent, tenant):
    record = write(admin_agent, subject="user:1")
    response = delete(
        admin_agent, f"{RECORDS}/{record['id']}", {"dry_run": True, "reason": "preview only"}
    )
    problem = assert_problem(response, 400)
    assert list(problem["errors"]) == ["dry_run"], problem
    assert "?dry_run=true" in problem["errors"]["dry_run"][0]
    assert still_there(tenant, record["id"])
    assert receipts(tenant) == 0


def test_it_keeps_the_reason_of_the_body_on_the_receipt_and_the_audit_event(admin_agent, tenant):
    record = write(admin_agent, subject="user:1")
    response = delete(admin_agent, f"{RECORDS}/{record['id']}", {"reason": "user asked"})
    assert response.status_code == 200, response.content
    receipt = response.json()
    assert receipt["reason"] == "user asked"
    assert not still_there(tenant, record["id"])
    shown = admin_agent.get(f"/api/v1/deletion-receipts/{receipt['id']}")
    assert shown.json()["reason"] == "user asked"
    (event,) = delete_events(admin_agent, record["id"])
    assert event["data"]["reason"] == "user asked"
    assert event["data"]["receipt"] == receipt["id"]


def test_it_still_says_deleted_through_the_api_without_a_reason(admin_agent, tenant):
    record = write(admin_agent, subject="user:1")
    response = admin_agent.delete(f"{RECORDS}/{record['id']}")
    assert response.status_code == 200, response.content
    assert response.json()["reason"] == "deleted through the API"
    (event,) = delete_events(admin_agent, record["id"])
    assert event["data"]["reason"] == "deleted through the API"


def test_it_previews_with_a_reason_in_the_body_and_changes_nothing(admin_agent, tenant):
    record = write(admin_agent, subject="user:1")
    response = delete(
        admin_agent, f"{RECORDS}/{record['id']}?dry_run=true", {"reason": "preview only"}
    )
    assert response.status_code == 200, response.content
    assert response.json()["dry_run"] is True
    assert still_there(tenant, record["id"])
    assert receipts(tenant) == 0


def test_it_refuses_a_reason_in_both_the_body_and_the_query(admin_agent, tenant):
    record = write(admin_agent, subject="user:1")
    response = delete(admin_agent, f"{RECORDS}/{record['id']}?reason=one", {"reason": "two"})
    problem = assert_problem(response, 400)
    assert list(problem["errors"]) == ["reason"], problem
    assert still_there(tenant, record["id"])


@pytest.mark.parametrize(
    ("body", "member"),
    [({"reason": "x" * 2001}, "reason"), ({"reason": 5}, "reason"), ({"reason": ""}, "reason")],
    ids=["too long", "not a string", "blank"],
)
def test_it_refuses_a_reason_that_breaks_the_rules(admin_agent, tenant, body, member):
    record = write(admin_agent, subject="user:1")
    problem = assert_problem(delete(admin_agent, f"{RECORDS}/{record['id']}", body), 400)
    assert list(problem["errors"]) == [member], problem
    assert still_there(tenant, record["id"])


@pytest.mark.parametrize(
    ("data", "content_type"),
    [
        ("not json", "text/plain"),
        ("not json", "application/json"),
        ('{"dry_run": true}', ""),
        ('{"reason": "a", "reason": "b"}', "application/json"),
        ("[]", "application/json"),
    ],
    ids=["text", "malformed json", "no content type", "reason twice", "not an object"],
)
def test_it_refuses_a_body_it_cannot_read_and_deletes_nothing(
    admin_agent, tenant, data, content_type
):
    record = write(admin_agent, subject="user:1")
    response = delete(admin_agent, f"{RECORDS}/{record['id']}", data, content_type)
    assert response.status_code in (400, 415), response.content
    assert_problem(response, response.status_code)
    assert still_there(tenant, record["id"])
    assert receipts(tenant) == 0


def test_it_refuses_a_body_sent_in_chunks_and_deletes_nothing(admin_agent, tenant):
    # Under gunicorn a chunked body arrives without a Content-Length, which Django reads as no
    # body: the dry run in it would be lost.
    record = write(admin_agent, subject="user:1")
    response = admin_agent.client.delete(
        f"{RECORDS}/{record['id']}",
        content_type="application/json",
        headers={"Authorization": f"Bearer {admin_agent.token}", "Transfer-Encoding": "chunked"},
    )
    problem = assert_problem(response, 400)
    assert list(problem["errors"]) == ["body"], problem
    assert still_there(tenant, record["id"])
