"""Failures in a real browser are visible: a refused htmx action says so, an expired session
goes to the sign-in page and comes back, a CSRF failure is the console's page."""

from __future__ import annotations

import re

import pytest
from django.conf import settings
from playwright.sync_api import expect

from apps.tenancy.models import Role
from tests.browser.support import requested as _requested
from tests.factories import MembershipFactory

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
