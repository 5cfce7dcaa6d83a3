"""Working a busy queue in a real browser, by keyboard: claims (and a colleague's claim in a
stale tab), canned reasons on the number keys, the "new requests" notice, grouping, the
conflict queue's 1 / 2 / 3, the lead's settings with their form errors, and the memory
table's text column at volume."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from playwright.sync_api import expect

from apps.core.actors import Actor
from apps.records.models import Conflict, PromotionRequest
from apps.review.claims import claims_take
from apps.review.models import ReviewClaim
from apps.review.reasons import review_reason_add
from apps.tenancy.context import tenant_scope
from apps.tenancy.models import Role
from tests.browser.support import requested as _requested
from tests.factories import person
from tests.records.support import write_ok

pytestmark = pytest.mark.django_db(transaction=True)


def _states(tenant) -> dict[str, str]:
    with tenant_scope(tenant.pk):
        return dict(PromotionRequest.objects.values_list("record__subject", "state"))


def _holders(tenant) -> dict[str, str]:
    with tenant_scope(tenant.pk):
        return dict(ReviewClaim.objects.values_list("request__record__subject", "holder_label"))


def _reason(tenant, decision: str, text: str) -> None:
    with tenant_scope(tenant.pk):
        review_reason_add(tenant=tenant, decision=decision, text=text, actor=Actor.system("t"))


def test_c_claims_the_focused_request_and_a_colleague_sees_it(
    new_page, reviewer, django_user_model, tenant, agent, console_path, screenshot
):
    for n in range(3):
        _requested(agent, f"user:{n}")
    colleague = person(tenant, "cole", Role.REVIEWER)
    page = new_page(reviewer)
    page.goto(console_path("review"))
    rows = page.locator("[data-review-row]")
    page.keyboard.press("j")
    page.keyboard.press("j")
    expect(rows.nth(1)).to_be_focused()
    page.keyboard.press("c")
    expect(rows.nth(1)).to_contain_text("Yours")
    expect(rows.nth(1)).to_be_focused()  # the row was redrawn; the focus stays on it
    expect(page.locator("#claims-held")).to_have_text("You hold 1 request")
    assert _holders(tenant) == {"user:1": "rhea"}

    other = new_page(colleague)
    other.goto(console_path("review"))
    held = other.locator("[data-review-row]").filter(has_text="user:1")
    expect(held).to_contain_text("rhea is on it")
    screenshot(other)

    page.keyboard.press("c")  # c again releases it
    expect(rows.nth(1)).not_to_contain_text("Yours")
    assert _holders(tenant) == {}


def test_a_stale_tab_sees_who_claimed_the_request_it_tries_to_decide(
    reviewer_page, tenant, agent, django_user_model, console_path, screenshot
):
    _requested(agent, "user:1")
    page = reviewer_page
    page.goto(console_path("review"))
    colleague = person(tenant, "cole", Role.REVIEWER)
    with tenant_scope(tenant.pk):
        claims_take(
            tenant=tenant,
            request_ids=list(PromotionRequest.objects.values_list("pk", flat=True)),
            actor=Actor.for_user(colleague),
        )
    page.keyboard.press("j")
    page.keyboard.press("a")
    page.keyboard.type("matches the CRM record")
    page.keyboard.press("Enter")
    detail = page.locator("#review-detail")
    expect(detail.get_by_role("alert")).to_contain_text("cole is working on this request")
    expect(page.locator("[data-review-row]").first).to_contain_text("cole is on it")
    screenshot(page)
    assert _states(tenant) == {"user:1": "open"}


def test_claim_the_next_batch_then_release_them(reviewer_page, tenant, agent, console_path):
    for n in range(3):
        _requested(agent, f"user:{n}")
    page = reviewer_page
    page.goto(console_path("review"))
    page.get_by_role("button", name=re.compile("^Claim the next")).click()
    expect(page.locator("#messages")).to_contain_text("Claimed 3 requests until")
    expect(page).to_have_url(re.compile(r"claim=mine"))
    expect(page.locator("#claims-held")).to_have_text("You hold 3 requests")
    page.get_by_role("button", name="Release all mine").click()
    expect(page.locator("#messages")).to_contain_text("Released 3 requests")
    assert _holders(tenant) == {}


def test_a_number_key_rejects_with_the_canned_reason(
    reviewer_page, tenant, agent, console_path, screenshot
):
    for n in range(3):
        _requested(agent, f"user:{n}")
    _reason(tenant, "reject", "Duplicate of an existing fact")
    _reason(tenant, "reject", "Test data from staging")
    page = reviewer_page
    page.goto(console_path("review"))
    page.keyboard.press("?")
    dialog = page.get_by_role("dialog", name="Keyboard shortcuts")
    expect(dialog).to_contain_text("reject it because “Test data from staging”")
    page.keyboard.press("Escape")
    page.keyboard.press("j")
    page.keyboard.press("2")
    rows = page.locator("[data-review-row]")
    expect(rows).to_have_count(2)
    expect(page.locator("[data-review-row]:focus")).to_contain_text("user:1")
    screenshot(page)
    with tenant_scope(tenant.pk):
        decided = PromotionRequest.objects.get(record__subject="user:0")
    assert (decided.state, decided.decision_reason) == ("rejected", "Test data from staging")
    page.keyboard.press("9")  # no ninth reason: nothing happens
    expect(rows).to_have_count(2)


def test_the_card_offers_canned_reasons_as_buttons_by_keyboard(
    reviewer_page, tenant, agent, console_path
):
    _requested(agent, "user:1")
    _reason(tenant, "approve", "Matches the CRM export")
    page = reviewer_page
    page.goto(console_path("review"))
    button = page.locator("#review-detail").get_by_role(
        "button", name=re.compile("^Approve: Matches the CRM export")
    )
    button.focus()
    page.keyboard.press("Enter")
    expect(page.locator("[data-review-row]")).to_have_count(0)
    assert _states(tenant) == {"user:1": "approved"}


def test_r_offers_the_reason_last_rejected_with(reviewer_page, tenant, agent, console_path):
    for n in range(2):
        _requested(agent, f"user:{n}")
    page = reviewer_page
    page.goto(console_path("review"))
    page.keyboard.press("j")
    page.keyboard.press("r")
    page.keyboard.type("no such customer")
    page.keyboard.press("Enter")
    expect(page.locator("[data-review-row]")).to_have_count(1)
    expect(page.locator("[data-review-row]:focus")).to_have_count(1)
    page.keyboard.press("r")
    expect(page.locator("[data-review-row] input[name=reason]:focus")).to_have_value(
        "no such customer"
    )
    page.keyboard.press("Enter")
    expect(page.locator("[data-review-row]")).to_have_count(0)
    assert sorted(_states(tenant).values()) == ["rejected", "rejected"]


def test_new_requests_are_announced_and_added_without_losing_the_place(
    reviewer_page, tenant, agent, console_path, screenshot
):
    for n in range(3):
        _requested(agent, f"user:{n}")
    page = reviewer_page
    page.goto(console_path("review"))
    page.keyboard.press("j")
    page.keyboard.press("j")
    rows = page.locator("[data-review-row]")
    expect(rows.nth(1)).to_be_focused()
    for n in range(2):
        _requested(agent, f"user:new{n}")
    # The poll runs every 20 s; the test asks for it at once, as the timer would.
    page.evaluate("document.body.dispatchEvent(new Event('review:arrivals'))")
    notice = page.locator("#review-arrivals")
    expect(notice).to_contain_text("2 new requests since this page loaded")
    expect(page.locator("#review-count")).to_have_text("5 pending")
    screenshot(page)
    notice.get_by_role("link", name="Add them to the list").click()
    expect(rows).to_have_count(5)
    expect(rows.nth(4)).to_contain_text("new")
    expect(rows.nth(1)).to_have_class(re.compile("is-focused"))
    expect(notice).not_to_contain_text("new request")
    page.keyboard.press("j")  # the place is kept: j goes on from user:1
    expect(page.locator("[data-review-row]:focus")).to_contain_text("user:2")


def test_grouping_decides_a_group_together(reviewer_page, tenant, agent, console_path, screenshot):
    for n in range(3):
        _requested(agent, f"user:{n}", key="shipping.preference")
    _requested(agent, "user:9", key="contact.email")
    page = reviewer_page
    page.goto(console_path("review"))
    page.get_by_text("More filters").click()  # grouping is among the folded filters
    page.get_by_label("Group by").select_option("key")
    page.get_by_role("button", name="Filter").click()
    table = page.get_by_role("table", name=re.compile("Pending requests by key"))
    expect(table).to_contain_text("shipping.preference")
    screenshot(page)
    table.get_by_role("link", name=re.compile("^Reject 3… in shipping.preference")).focus()
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Reject 3 requests?")).to_be_visible()
    page.get_by_label("Reason for rejecting these").fill("a test batch")
    page.get_by_role("button", name="Reject 3 requests").click()
    expect(page.locator("main")).to_contain_text("Rejected 3 requests")
    assert _states(tenant) == {
        "user:0": "rejected",
        "user:1": "rejected",
        "user:2": "rejected",
        "user:9": "open",
    }


def test_the_conflict_queue_resolves_with_1_2_3(
    reviewer_page, tenant, agent, console_path, screenshot
):
    for n in range(3):
        write_ok(agent, subject=f"user:{n}", value="a", source={"kind": "interaction", "ref": "a"})
        write_ok(agent, subject=f"user:{n}", value="b", source={"kind": "document", "ref": "b"})
    page = reviewer_page
    page.goto(console_path("conflicts"))
    cards = page.locator("article[data-review-item]")
    expect(cards).to_have_count(3)
    expect(cards.nth(0).locator(".differs")).not_to_have_count(0)
    page.keyboard.press("j")
    expect(cards.nth(0)).to_be_focused()
    page.keyboard.press("2")  # accept the new value
    expect(cards.nth(0).get_by_label("Reason")).to_be_focused()
    page.keyboard.type("the document is newer")
    page.keyboard.press("Enter")
    expect(cards.nth(0)).to_contain_text("accepted the new value")
    expect(cards.nth(1)).to_be_focused()  # on to the next open conflict
    expect(page.locator("#conflict-count")).to_have_text("2 open conflicts")
    page.keyboard.press("3")  # a corrected value: the value first, then the reason
    expect(cards.nth(1).get_by_label(re.compile("^Corrected value"))).to_be_focused()
    page.keyboard.type('"c"')
    page.keyboard.press("Tab")
    page.keyboard.type("both were wrong")
    page.keyboard.press("Enter")
    expect(cards.nth(1)).to_contain_text("wrote a corrected value")
    expect(cards.nth(2)).to_be_focused()
    page.keyboard.press("k")  # j / k pass over resolved conflicts
    expect(cards.nth(2)).to_be_focused()
    page.keyboard.press("1")
    reason = cards.nth(2).get_by_label("Reason")
    page.keyboard.press("Enter")  # no reason yet: the browser keeps the form back
    expect(reason).to_be_focused()
    assert reason.evaluate("field => field.validity.valueMissing")
    with tenant_scope(tenant.pk):
        states = sorted(Conflict.objects.values_list("state", flat=True))
    assert states == ["open", "resolved", "resolved"]
    page.keyboard.type("the CRM agrees")
    page.keyboard.press("Enter")
    expect(cards.nth(2)).to_contain_text("kept the current value")
    expect(page.locator("#conflict-count")).to_have_text("0 open conflicts")
    screenshot(page)


def test_the_conflict_queue_filters_and_sorts(reviewer_page, tenant, agent, console_path):
    for n, sensitivity in enumerate(("public", "restricted")):
        for value in ("a", "b"):
            write_ok(
                agent,
                subject=f"user:{n}",
                value=value,
                sensitivity=sensitivity,
                source={"kind": "interaction", "ref": value},
            )
    page = reviewer_page
    page.goto(console_path("conflicts"))
    page.get_by_text("More filters").click()  # sensitivity is among the folded filters
    page.get_by_label("Sensitivity").select_option("restricted")
    page.get_by_role("button", name="Filter").click()
    expect(page.locator("#conflict-count")).to_have_text("1 open conflict matching these filters")
    expect(page.locator("article[data-review-item]")).to_contain_text("user:1")
    page.goto(console_path("conflicts"))
    page.get_by_label("Order").select_option("sensitivity")
    page.get_by_role("button", name="Filter").click()
    expect(page.locator("article[data-review-item]").first).to_contain_text("user:1")


def test_a_lead_edits_the_canned_reasons_with_form_errors_shown(
    owner_page, tenant, console_path, screenshot
):
    page = owner_page
    page.goto(console_path("review-settings"))
    page.get_by_role("combobox", name="For").select_option("reject")
    page.get_by_role("button", name="Add reason").click()  # empty
    expect(page.locator("main")).to_contain_text("Write the reason.")
    reason = page.get_by_role("textbox", name="Reason")
    expect(reason).to_have_attribute("aria-invalid", "true")
    reason.fill("Duplicate of an existing fact")
    page.get_by_role("button", name="Add reason").click()
    expect(page.locator("#messages")).to_contain_text("on key 1")
    page.get_by_role("combobox", name="For").select_option("reject")
    page.get_by_role("textbox", name="Reason").fill("Test data")
    page.get_by_role("button", name="Add reason").click()
    item = page.get_by_role("listitem").filter(has_text="Test data")
    item.get_by_role("button", name=re.compile("^Move up")).click()
    expect(page.locator("#messages")).to_contain_text("“Test data” is now on key 1")
    page.get_by_label("A claim lasts (minutes)").fill("0")
    page.get_by_role("button", name="Save").click()
    expect(page.locator("main")).to_contain_text("A claim lasts at least 1 minute.")
    page.get_by_label("A claim lasts (minutes)").fill("45")
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#messages")).to_contain_text("A claim now lasts 45 minutes.")
    screenshot(page)
    tenant.refresh_from_db()
    assert tenant.review_claim_duration == timedelta(minutes=45)


def test_the_memory_tables_text_column_stays_readable_and_inside_the_page(
    owner_page, agent, console_path, screenshot
):
    write_ok(
        agent,
        subject="user:" + "s" * 150,
        key="note." + "k" * 120,
        value="x" * 1500,
        scope={"domain": "d" * 90},
        source={"kind": "interaction", "ref": "long"},
    )
    write_ok(agent, subject="user:2", value="short", source={"kind": "interaction", "ref": "2"})
    page = owner_page
    page.goto(console_path("memories"))
    table = page.locator("table.memory-table")
    expect(table).to_be_visible()
    widths = page.evaluate(
        """() => {
            const wrap = document.querySelector('table.memory-table').closest('.table-wrap');
            const text = document.querySelector('table.memory-table td.memory-preview');
            return {wrap: wrap.clientWidth, scroll: wrap.scrollWidth,
                    text: text.getBoundingClientRect().width,
                    page: document.documentElement.scrollWidth};
        }"""
    )
    screenshot(page)
    assert widths["scroll"] <= widths["wrap"], "the table fits its frame at 1280 px"
    assert widths["page"] <= 1280
    assert widths["text"] >= 12 * 16, "the text column keeps at least 12rem"
