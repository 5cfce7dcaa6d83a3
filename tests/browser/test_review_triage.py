"""Working through the promotion queue in a real browser: the compact triage list with its
detail pane, the keys (j / k / a / r / u / x / ?), live counts, undo and selection."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from apps.records.models import MemoryRecord, PromotionRequest
from apps.tenancy.context import tenant_scope
from tests.browser.support import requested as _requested

pytestmark = pytest.mark.django_db(transaction=True)


def _trust(tenant) -> dict[str, str]:
    with tenant_scope(tenant.pk):
        return {
            subject: trust
            for subject, trust in MemoryRecord.objects.values_list("subject", "trust")
        }


def _states(tenant) -> dict[str, str]:
    with tenant_scope(tenant.pk):
        return dict(PromotionRequest.objects.values_list("record__subject", "state"))


def test_it_decides_with_the_keyboard_and_advances(
    reviewer_page, tenant, agent, console_path, screenshot
):
    for n in range(4):
        _requested(agent, f"user:{n}")
    page = reviewer_page
    page.goto(console_path("review"))
    rows = page.locator("[data-review-row]")
    expect(rows).to_have_count(4)
    expect(page.locator("#review-count")).to_have_text("4 pending")
    detail = page.locator("#review-detail")

    page.keyboard.press("j")
    expect(rows.nth(0)).to_be_focused()
    expect(detail).to_contain_text("user:0")
    page.keyboard.press("j")
    expect(rows.nth(1)).to_be_focused()
    expect(detail).to_contain_text("user:1")  # the pane follows the focus

    page.keyboard.press("a")  # approve user:1: the first time, the reason is asked for
    page.keyboard.type("matches the CRM record")
    page.keyboard.press("Enter")  # approved; on to user:2
    expect(rows).to_have_count(3)
    expect(page.locator("#review-count")).to_have_text("3 pending")
    expect(page.locator("#row-" + "x")).to_have_count(0)
    focused = page.locator("[data-review-row]:focus")
    expect(focused).to_contain_text("user:2")
    expect(detail).to_contain_text("user:2")
    expect(page.locator("[data-review-toast]")).to_contain_text("Approved user:1")

    page.keyboard.press("r")  # reject user:2 with a reason
    page.keyboard.type("no such customer")
    page.keyboard.press("Enter")
    expect(rows).to_have_count(2)
    expect(page.locator("[data-review-row]:focus")).to_contain_text("user:3")
    expect(page.locator("#review-count")).to_have_text("2 pending")
    screenshot(page)
    states = _states(tenant)
    assert (states["user:1"], states["user:2"], states["user:0"]) == (
        "approved",
        "rejected",
        "open",
    )
    assert _trust(tenant)["user:1"] == "confirmed"

    page.keyboard.press("u")  # undo the rejection: audited, the request is open again
    expect(rows).to_have_count(3)
    expect(page.locator("#review-count")).to_have_text("3 pending")
    expect(page.locator("[data-review-row]:focus")).to_contain_text("user:2")
    assert _states(tenant)["user:2"] == "open"


def test_it_undoes_an_approval_by_returning_the_record_to_provisional(
    reviewer_page, tenant, agent, console_path
):
    _requested(agent, "user:1")
    page = reviewer_page
    page.goto(console_path("review"))
    page.keyboard.press("j")
    page.keyboard.press("a")
    page.keyboard.type("matches the CRM record")
    page.keyboard.press("Enter")
    expect(page.locator("[data-review-row]")).to_have_count(0)
    assert _trust(tenant)["user:1"] == "confirmed"
    page.get_by_role("button", name=re.compile("^Undo")).click()
    expect(page.locator("[data-review-row]")).to_have_count(1)
    assert _trust(tenant)["user:1"] == "provisional"
    assert _states(tenant)["user:1"] == "open"


def test_it_lists_the_keys_on_question_mark(reviewer_page, agent, console_path, screenshot):
    _requested(agent, "user:1")
    page = reviewer_page
    page.goto(console_path("review"))
    page.keyboard.press("?")
    dialog = page.get_by_role("dialog", name="Keyboard shortcuts")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("approve the focused request")
    screenshot(page)
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()


def test_it_decides_a_selection_after_a_confirmation_listing_it(
    reviewer_page, tenant, agent, console_path, screenshot
):
    for n in range(5):
        _requested(agent, f"user:{n}")
    page = reviewer_page
    page.goto(console_path("review"))
    page.keyboard.press("j")
    page.keyboard.press("j")  # user:1
    page.keyboard.press("x")
    page.keyboard.press("Shift+J")  # and user:2
    page.keyboard.press("Shift+J")  # and user:3
    expect(page.locator("[data-selection-count]")).to_have_text("3 selected")
    page.get_by_role("button", name="Reject selected…").click()
    expect(page.get_by_role("heading", name="Reject 3 requests?")).to_be_visible()
    listed = page.get_by_role("region", name="Requests this rejects")
    for n in (1, 2, 3):
        expect(listed).to_contain_text(f"user:{n}")
    expect(listed).not_to_contain_text("user:0")
    expect(listed).not_to_contain_text("user:4")
    page.get_by_label("Reason for rejecting these").fill("test data from the staging CRM")
    screenshot(page)
    page.get_by_role("button", name="Reject 3 requests").click()
    expect(page.locator("main")).to_contain_text("Rejected 3 requests")
    states = _states(tenant)
    assert [states[f"user:{n}"] for n in range(5)] == ["open"] + ["rejected"] * 3 + ["open"]


def test_it_approves_with_one_key_using_the_reason_last_given(
    reviewer_page, tenant, agent, console_path
):
    for n in range(3):
        _requested(agent, f"user:{n}")
    page = reviewer_page
    page.goto(console_path("review"))
    rows = page.locator("[data-review-row]")
    page.keyboard.press("j")
    page.keyboard.press("a")
    page.keyboard.type("verified against the CRM export")
    page.keyboard.press("Enter")
    expect(rows).to_have_count(2)
    # The answer moves the focus to the next open request; the next key acts on that one.
    expect(page.locator("[data-review-row]:focus")).to_have_count(1)
    expect(page.locator("#review-detail [data-review-item]")).to_have_count(1)
    page.keyboard.press("a")  # one key: the reason last given is offered again
    expect(rows).to_have_count(1)
    assert sorted(_states(tenant).values()) == ["approved", "approved", "open"]
