"""axe-core on the console's queues and dashboard, wide and at a phone's width, and the
narrow screen's folded navigation.

axe-core 4.14.1 is vendored (``vendor/axe.min.js``, MPL-2.0, from the npm registry): the
tests never download it. It is injected into the page, which needs the context to bypass the
page's Content-Security-Policy (the policy forbids exactly that kind of injected script).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.records.support import write_ok

pytestmark = pytest.mark.django_db(transaction=True)

AXE = Path(__file__).resolve().parent / "vendor" / "axe.min.js"


def _violations(page) -> list[str]:
    page.add_script_tag(path=str(AXE))
    found = page.evaluate(
        "async () => (await axe.run(document, {resultTypes: ['violations']})).violations"
        ".map(v => v.id + ': ' + v.nodes.map(n => n.target.join(' ')).join(', '))"
    )
    return list(found)


def _busy_tenant(agent) -> None:
    for n in range(3):
        record = write_ok(agent, subject=f"user:{n}", source={"kind": "interaction", "ref": f"{n}"})
        response = agent.post(
            f"/api/v1/records/{record['id']}/promotion-requests",
            {"evidence": {"n": n}, "reason": "confirmed"},
        )
        assert response.status_code in (200, 201)
    for n in range(2):
        subject = f"user:c{n}"
        write_ok(agent, subject=subject, value="a", source={"kind": "interaction", "ref": "a"})
        write_ok(agent, subject=subject, value="b", source={"kind": "interaction", "ref": "b"})


@pytest.mark.parametrize("width", [1280, 390])
@pytest.mark.parametrize("name", ["review", "conflicts", "dashboard"])
def test_the_page_has_no_axe_violations(new_page, reviewer, agent, console_path, name, width):
    _busy_tenant(agent)
    page = new_page(reviewer, width=width, bypass_csp=True)
    page.goto(console_path(name))
    assert _violations(page) == []


def test_the_navigation_folds_into_a_menu_on_a_phone(
    new_page, reviewer, agent, console_path, screenshot
):
    _busy_tenant(agent)
    page = new_page(reviewer, width=390)
    page.goto(console_path("review"))
    sections = page.get_by_role("navigation", name="Sections of Acme Corp")
    expect(sections).to_be_hidden()
    toggle = page.get_by_role("button", name="Sections")
    expect(toggle).to_have_attribute("aria-expanded", "false")
    toggle.click()
    expect(sections).to_be_visible()
    expect(toggle).to_have_attribute("aria-expanded", "true")
    page.keyboard.press("Escape")
    expect(sections).to_be_hidden()
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, "nothing scrolls sideways"
    screenshot(page)
