"""Reviewing and erasing in a real browser: approve a promotion, resolve a conflict, delete a
memory and read its receipt."""

from __future__ import annotations

import re
import uuid

import pytest
from playwright.sync_api import expect

from apps.records.models import Fact, MemoryRecord
from apps.tenancy.context import tenant_scope
from tests.browser.support import requested as shared_requested
from tests.records.support import write_ok

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_approves_a_promotion_request(reviewer_page, tenant, agent, console_path, screenshot):
    record = write_ok(agent, subject="user:8812", source={"kind": "interaction", "ref": "i:1"})
    response = agent.post(
        f"/api/v1/records/{record['id']}/promotion-requests",
        {"evidence": {"ticket": "SUP-301"}, "reason": "customer confirmed on the phone"},
    )
    assert response.status_code in (200, 201), response.content[:500]
    page = reviewer_page
    page.goto(console_path("review"))
    item = page.locator("article[data-review-item]").filter(has_text="user:8812")
    expect(item).to_contain_text("customer confirmed on the phone")
    item.get_by_label("Reason for approving").fill("matches the support ticket")
    item.get_by_role("button", name=re.compile("^Approve")).click()
    expect(item.get_by_role("status")).to_contain_text("Approved")
    screenshot(page)
    with tenant_scope(tenant.pk):
        assert MemoryRecord.objects.get(pk=record["id"]).trust == "confirmed"


def test_it_resolves_a_conflict_by_accepting_the_new_value(
    reviewer_page, tenant, agent, console_path, screenshot
):
    write_ok(
        agent, subject="user:8812", value="carrier_a", source={"kind": "interaction", "ref": "i:1"}
    )
    newer = write_ok(
        agent, subject="user:8812", value="carrier_b", source={"kind": "interaction", "ref": "i:2"}
    )
    assert newer["conflict"], "a contradicting write opens a conflict"
    page = reviewer_page
    page.goto(console_path("conflicts"))
    item = page.locator("article[data-review-item]").filter(has_text="user:8812")
    item.get_by_label("Accept the new value").check()
    item.get_by_label("Reason").fill("the customer changed carrier in March")
    item.get_by_role("button", name=re.compile("^Resolve")).click()
    expect(item.get_by_role("status")).to_contain_text("accepted the new value")
    screenshot(page)
    with tenant_scope(tenant.pk):
        fact = Fact.objects.get(subject="user:8812", key="shipping.preference")
        assert fact.current_id is not None
        assert str(fact.current_id) == newer["id"]


def test_it_deletes_a_memory_and_shows_its_receipt(
    member_page, tenant, agent, console_path, screenshot
):
    record = write_ok(agent, subject="user:4711", source={"kind": "interaction", "ref": "i:9"})
    page = member_page
    page.goto(console_path("memory-delete", record_id=record["id"]))
    expect(page.get_by_role("heading", name=re.compile("^Delete"))).to_be_visible()
    page.get_by_label("Reason").fill("customer asked to be forgotten")
    page.get_by_role("button", name="Delete permanently").click()
    expect(page.get_by_role("heading", name="Deletion receipt")).to_be_visible()
    expect(page.locator("main")).to_contain_text("customer asked to be forgotten")
    expect(page.locator("main")).to_contain_text(record["id"])
    expect(page.locator("main")).not_to_contain_text("carrier_a")  # never the content
    screenshot(page)
    with tenant_scope(tenant.pk):
        assert not MemoryRecord.objects.filter(pk=record["id"]).exists()


def test_it_bulk_approves_only_the_filtered_requests(
    reviewer_page, tenant, agent, console_path, screenshot
):
    def requested(subject: str, domain: str) -> str:
        return shared_requested(agent, subject, scope={"domain": domain})

    matching = [requested(f"user:a{n}", "alpha") for n in range(2)]
    others = [requested(f"user:b{n}", "beta") for n in range(3)]
    page = reviewer_page
    page.goto(console_path("review") + "?domain=alpha")
    page.get_by_role("link", name=re.compile("^Approve all matching")).click()
    expect(page.get_by_role("heading", name="Approve 2 requests?")).to_be_visible()
    expect(page.locator("main")).to_contain_text("user:a1")
    expect(page.locator("main")).not_to_contain_text("user:b0")
    page.get_by_label("Reason for approving these").fill("checked against the CRM export")
    page.get_by_role("button", name="Approve 2 requests").click()
    expect(page.locator("main")).to_contain_text("Approved 2 requests")
    screenshot(page)
    with tenant_scope(tenant.pk):
        trust = dict(MemoryRecord.objects.values_list("id", "trust"))
    assert [trust[uuid.UUID(pk)] for pk in matching] == ["confirmed"] * 2
    assert [trust[uuid.UUID(pk)] for pk in others] == ["provisional"] * 3
