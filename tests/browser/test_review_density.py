"""The promotion queue's first screen at 1280x800 is the list: one line of filters (the rarely
used ones folded behind "More filters") and compact rows, 15 or more of them in view."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.support import requested as _requested

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_first_screen_of_the_queue_shows_fifteen_requests_or_more(
    reviewer_page, agent, console_path, screenshot
):
    for n in range(20):
        _requested(agent, f"user:{n:02d}")
    page = reviewer_page
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(console_path("review"))
    rows = page.locator("[data-review-row]")
    expect(rows).to_have_count(20)
    in_view = page.evaluate(
        """() => [...document.querySelectorAll('[data-review-row]')]
                 .filter(row => row.getBoundingClientRect().bottom <= window.innerHeight).length"""
    )
    assert in_view >= 15, f"{in_view} requests on the first screen"
    bar = page.locator("form.filter-bar").bounding_box()
    assert bar is not None
    assert bar["height"] < 48  # one line
    screenshot(page)
    # The folded filters are there, one click away.
    domain = page.get_by_label("Domain")
    expect(domain).to_be_hidden()
    page.get_by_text("More filters").click()
    expect(domain).to_be_visible()
