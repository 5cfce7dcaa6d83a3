"""Failures in a real browser are visible: a refused htmx action says so, an expired session
goes to the sign-in page (which says the change was not saved) and comes back, a CSRF failure
is the console's page, and a decision refused for a colleague's claim stays on screen."""

from __future__ import annotations

import re

import pytest
from django.conf import settings
from playwright.sync_api import expect

from apps.core.actors import Actor
from apps.records.models import PromotionRequest
from apps.review.claims import claims_take
from apps.tenancy.context import tenant_scope
from apps.tenancy.models import Role
from tests.browser.support import requested as _requested
from tests.factories import MembershipFactory, person

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_shows_a_refused_action_in_a_stale_tab(
    reviewer_page, reviewer, tenant, agent, console_path, screenshot
):
    _requested(agent, "user:1")
    page = reviewer_page
    page.goto(console_path("review"))
    # Meanwhile an admin makes the reviewer a member: the open tab is now stale.
    MembershipFactory(tenant=tenant, user=reviewer, role=Role.MEMBER)
    page.get_by_label(re.compile("^Reason for approving user:1")).first.fill("checked")
    page.get_by_role("button", name=re.compile("^Approve user:1")).first.click()
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("403")
    expect(alert).to_contain_text("does not include this page")
    screenshot(page)


def test_it_sends_an_expired_session_to_sign_in_and_back(
    reviewer_page, tenant, agent, console_path
):
    _requested(agent, "user:1")
    page = reviewer_page
    page.goto(console_path("review") + "?subject=user:1")
    page.context.clear_cookies(name=settings.SESSION_COOKIE_NAME)  # the session ends
    page.get_by_label(re.compile("^Reason for approving user:1")).first.fill("checked")
    page.get_by_role("button", name=re.compile("^Approve user:1")).first.click()
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    expect(page.get_by_role("alert")).to_contain_text("that change was not saved")
    page.get_by_label("Username").fill("rhea")
    page.get_by_label("Password").fill("pw-rhea")
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(re.compile(re.escape(console_path("review")) + r"\?subject=user"))
    expect(page.get_by_role("heading", name="Promotion review")).to_be_visible()


def test_it_shows_a_csrf_failure_of_an_htmx_action(reviewer_page, agent, console_path, screenshot):
    _requested(agent, "user:1")
    page = reviewer_page
    page.goto(console_path("review"))
    page.context.clear_cookies(name=settings.CSRF_COOKIE_NAME)
    page.get_by_label(re.compile("^Reason for approving user:1")).first.fill("checked")
    page.get_by_role("button", name=re.compile("^Approve user:1")).first.click()
    expect(page.get_by_role("alert")).to_contain_text("This form has expired")
    screenshot(page)


def test_a_refusal_for_a_colleagues_claim_stays_and_the_list_waits(
    reviewer_page, tenant, agent, console_path, screenshot
):
    for n in range(3):
        _requested(agent, f"user:{n}")
    page = reviewer_page
    page.goto(console_path("review"))
    rows = page.locator("[data-review-row]")
    expect(rows).to_have_count(3)
    colleague = person(tenant, "cole", Role.REVIEWER)
    with tenant_scope(tenant.pk):
        first = PromotionRequest.objects.get(record__subject="user:0")
        claims_take(tenant=tenant, request_ids=[first.pk], actor=Actor.for_user(colleague))
    page.keyboard.press("j")
    page.keyboard.press("a")
    page.keyboard.type("matches the CRM record")
    page.keyboard.press("Enter")
    detail = page.locator("#review-detail")
    expect(detail.get_by_role("alert")).to_contain_text("cole is working on this request")
    # The list does not go on to the next request: the refused row keeps the focus, its card
    # (with the refusal naming the holder) stays beside it, and the row says who holds it.
    expect(page.locator("[data-review-row]:focus")).to_contain_text("user:0")
    expect(page.locator("[data-review-row].is-focused")).to_contain_text("cole is on it")
    expect(rows).to_have_count(3)
    expect(detail).to_contain_text("user:0")
    expect(detail).not_to_contain_text("user:1")
    screenshot(page)
    # The reviewer moves on themselves.
    page.keyboard.press("j")
    expect(detail).to_contain_text("user:1")
    with tenant_scope(tenant.pk):
        assert PromotionRequest.objects.get(pk=first.pk).state == "open"
