"""The conflict queue's first screen at 1280x800 is the list, as the promotion queue's: one
line of filters and compact rows, 15 or more conflicts in view; ticked conflicts are resolved
together after a confirmation that lists every one of them."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from apps.records.models import Conflict
from apps.tenancy.context import tenant_scope
from tests.records.support import write_ok

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_first_screen_shows_fifteen_conflicts_and_ticked_ones_resolve_together(
    reviewer_page, tenant, agent, console_path, screenshot
):
    for n in range(20):
        for value in ("carrier_a", "carrier_b"):
            write_ok(
                agent,
                subject=f"user:{n:02d}",
                value=value,
                source={"kind": "interaction", "ref": f"i:{n}:{value}"},
            )
    page = reviewer_page
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(console_path("conflicts"))
    rows = page.locator("article[data-review-item]")
    expect(rows).to_have_count(20)
    in_view = page.evaluate(
        """() => [...document.querySelectorAll('article[data-review-item]')]
                 .filter(row => row.getBoundingClientRect().bottom <= window.innerHeight).length"""
    )
    assert in_view >= 15, f"{in_view} conflicts on the first screen"
    bar = page.locator("form.filter-bar").bounding_box()
    assert bar is not None
    assert bar["height"] < 48  # one line
    # The focused row shows its resolve form; the others only their line.
    expect(rows.nth(0).get_by_label("Accept the new value")).to_be_visible()
    expect(rows.nth(1).get_by_label("Accept the new value")).to_be_hidden()
    screenshot(page)

    for n in range(3):
        rows.nth(n).get_by_role("checkbox").check()
    expect(page.locator("[data-selection-count]")).to_have_text("3 selected")
    page.get_by_role("button", name="Accept new for selected…").click()
    expect(page.get_by_role("heading", name="Resolve 3 conflicts?")).to_be_visible()
    listed = page.get_by_role("region", name="Conflicts this resolves")
    for n in range(3):
        expect(listed).to_contain_text(f"user:{n:02d}")
    expect(listed).not_to_contain_text("user:03")
    expect(page.get_by_label("Accept the new values")).to_be_checked()
    page.get_by_label("Reason for resolving these").fill("the newer interaction is right")
    page.get_by_role("button", name="Resolve 3 conflicts").click()
    expect(page.locator("main")).to_contain_text("Resolved 3 conflicts: accepted the new value")
    expect(page.locator("#conflict-count")).to_have_text("17 open conflicts")
    with tenant_scope(tenant.pk):
        resolved = sorted(
            Conflict.objects.filter(state="resolved").values_list("fact__subject", flat=True)
        )
    assert resolved == ["user:00", "user:01", "user:02"]
    assert re.search("conflicts", page.url)
