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


# One test a width walks its pages in one signed-in page: each test of this module costs a
# fresh database and browser context, which is most of a page's check.
@pytest.mark.parametrize("width", [1280, 390])
def test_the_pages_have_no_axe_violations(new_page, reviewer, agent, console_path, width):
    _busy_tenant(agent)
    page = new_page(reviewer, width=width, bypass_csp=True)
    found = {}
    for name in ["review", "conflicts", "dashboard"]:
        page.goto(console_path(name))
        found[name] = _violations(page)
    assert found == {name: [] for name in found}


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


def test_the_tenant_switcher_closes_on_escape_and_on_a_click_outside(
    new_page, owner, tenant, other_tenant, console_path
):
    from apps.tenancy.models import Role
    from tests.factories import MembershipFactory

    MembershipFactory(tenant=other_tenant, user=owner, role=Role.REVIEWER)
    page = new_page(owner)
    page.goto(console_path("dashboard"))
    switcher = page.get_by_role("navigation", name="Tenants")
    menu = switcher.get_by_role("link", name="All your tenants")
    switcher.locator("summary").click()
    expect(menu).to_be_visible()
    page.keyboard.press("Escape")
    expect(menu).to_be_hidden()
    expect(switcher.locator("summary")).to_be_focused()
    switcher.locator("summary").click()
    expect(menu).to_be_visible()
    page.locator("main h1").click()
    expect(menu).to_be_hidden()


def test_the_sections_stay_beside_the_page_on_a_wide_screen(reviewer_page, console_path):
    page = reviewer_page
    page.goto(console_path("review"))
    expect(page.get_by_role("navigation", name="Sections of Acme Corp")).to_be_visible()
    expect(page.locator("[data-nav-toggle]")).to_be_hidden()
    heading = page.get_by_role("heading", name="Promotion review").bounding_box()
    assert heading is not None
    assert heading["y"] < 200, "the page starts at the top, beside the sections"


ADMIN_PAGES = [
    "memories",
    "members",
    "credentials",
    "audit",
    "runs",
    "retention",
    "holds",
    "deletions",
    "erasures",
]


@pytest.mark.parametrize("width", [1280, 390])
def test_the_admin_pages_have_no_axe_violations_and_no_sideways_scroll(
    new_page, owner, agent, console_path, width
):
    _busy_tenant(agent)
    page = new_page(owner, width=width, bypass_csp=True)
    found = {}
    for name in ADMIN_PAGES:
        page.goto(console_path(name))
        found[name] = (_violations(page), page.evaluate("document.documentElement.scrollWidth"))
    assert found == {name: ([], min(scroll, width)) for name, (_, scroll) in found.items()}


def _evaluated_tenant(tenant) -> None:
    """A finished evaluation run, and a decision that relied on a memory deleted since."""
    from django.utils import timezone

    from apps.evaluation.models import EvaluationRunState
    from tests.evaluation.conftest import fake_results
    from tests.evaluation.support import decide, remember, writer_agent
    from tests.factories import EvaluationRunFactory

    EvaluationRunFactory(
        tenant=tenant,
        requested_by_type="user",
        requested_by_label="olivia",
        finished_at=timezone.now(),
        state=EvaluationRunState.DONE,
        results=fake_results(),
        passed=True,
    )
    writer = writer_agent(tenant)
    gone = remember(writer, tenant, "gone.preference")
    decide(writer, "preference")
    assert writer.delete(f"/api/v1/records/{gone}").status_code == 200


@pytest.mark.parametrize("width", [1280, 390])
def test_the_evaluation_pages_have_no_axe_violations_and_no_sideways_scroll(
    new_page, owner, tenant, console_path, width, screenshot
):
    _evaluated_tenant(tenant)
    page = new_page(owner, width=width, bypass_csp=True)
    for name in ("evaluation", "decisions-at-risk"):
        page.goto(console_path(name))
        assert _violations(page) == [], name
        assert page.evaluate("document.documentElement.scrollWidth") <= width, name
        if width == 1280 and name == "evaluation":
            screenshot(page)


def _lead_tenant(agent, tenant, owner) -> None:
    """Requests (two claimed, one by someone else), canned reasons and decisions, so the queue,
    the lead's pages and the cards show every new control."""
    from apps.core.actors import Actor
    from apps.records.models import PromotionRequest
    from apps.review.claims import claims_take
    from apps.review.reasons import review_reason_add
    from apps.review.services import promotion_reject
    from apps.tenancy.context import tenant_scope

    _busy_tenant(agent)
    actor = Actor.for_user(owner)
    with tenant_scope(tenant.pk):
        review_reason_add(tenant=tenant, decision="reject", text="Test data", actor=actor)
        review_reason_add(tenant=tenant, decision="approve", text="Matches the CRM", actor=actor)
        first, second, third = PromotionRequest.objects.order_by("requested_at")
        claims_take(tenant=tenant, request_ids=[first.pk], actor=actor)
        claims_take(tenant=tenant, request_ids=[second.pk], actor=Actor("user", "someone", "cole"))
        promotion_reject(request=third, actor=actor, reason="no such customer")


@pytest.mark.parametrize("width", [1280, 390])
def test_the_review_tools_have_no_axe_violations(
    new_page, owner, agent, tenant, console_path, width
):
    """The queue with claims and canned reasons, grouped, and the lead's two pages (one
    tenant, one browser page: each page is checked in turn)."""
    _lead_tenant(agent, tenant, owner)
    page = new_page(owner, width=width, bypass_csp=True)
    found = {}
    for path in (
        console_path("review"),
        console_path("review") + "?group=key",
        console_path("review-settings"),
        console_path("review-throughput"),
    ):
        page.goto(path)
        found[path] = _violations(page)
        assert page.evaluate("document.documentElement.scrollWidth") <= width, path
    assert {path: names for path, names in found.items() if names} == {}


def test_the_item_pages_have_no_axe_violations(
    new_page, owner, reviewer, agent, tenant, console_path
):
    """A request's and a conflict's own pages, the bulk confirmation, a memory with its
    deletion and redaction pages, receipts, and the confirmations that ask for a reason
    (lifting a hold, revoking a credential, removing a member); the sign-in page too."""
    from apps.audit.models import DeletionReceipt
    from apps.core.actors import Actor
    from apps.governance.services import legal_hold_place
    from apps.records.models import Conflict, MemoryRecord, PromotionRequest
    from apps.tenancy.context import tenant_scope
    from apps.tenancy.models import Membership
    from tests.conftest import make_agent

    _lead_tenant(agent, tenant, owner)
    deleter = make_agent(tenant, "read,write,delete", "deleter")
    doomed = write_ok(deleter, subject="user:gone", source={"kind": "interaction", "ref": "gone"})
    assert deleter.delete(f"/api/v1/records/{doomed['id']}").status_code == 200
    with tenant_scope(tenant.pk):
        hold = legal_hold_place(
            tenant=tenant, actor=Actor.for_user(owner), reason="litigation", subject="user:0"
        )
        request = PromotionRequest.objects.first()
        conflict = Conflict.objects.first()
        receipt = DeletionReceipt.objects.first()
        record = MemoryRecord.objects.first()
        membership = Membership.objects.get(user=reviewer)
    assert request is not None
    assert conflict is not None
    assert receipt is not None
    assert record is not None
    page = new_page(owner, bypass_csp=True)
    found = {}
    for path in (
        console_path("review-request", request_id=request.pk),
        console_path("conflict", conflict_id=conflict.pk),
        console_path("review-bulk-approve"),
        console_path("deletion", receipt_id=receipt.pk),
        console_path("receipt", receipt_id=receipt.pk),
        console_path("memory", record_id=record.pk),
        console_path("memory-delete", record_id=record.pk),
        console_path("memory-redact", record_id=record.pk),
        console_path("memory-subject", subject="user:0"),
        console_path("memory-scopes"),
        console_path("hold-lift", hold_id=hold.pk),
        console_path("credential-revoke", credential_id=agent.credential.pk),
        console_path("member-remove", membership_id=membership.pk),
    ):
        page.goto(path)
        found[path] = _violations(page)
    anonymous = new_page(None, bypass_csp=True)
    anonymous.goto("/console/login/")
    found["/console/login/"] = _violations(anonymous)
    assert {path: names for path, names in found.items() if names} == {}
