"""The console in a real browser: signing in and switching tenants, the dashboard, the runs
page, issuing a credential."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone
from playwright.sync_api import expect

from apps.core.actors import Actor
from apps.records.models import MemoryRecord
from apps.state.models import Obligation
from apps.state.services import checkpoint_write, obligation_create, run_open
from apps.tenancy.context import tenant_scope
from apps.tenancy.models import AgentCredential, Role
from apps.tenancy.selectors import credential_for_token
from tests.factories import MembershipFactory
from tests.records.support import write_ok

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_signs_in_and_switches_tenants(
    new_page, owner, tenant, other_tenant, console_path, screenshot
):
    MembershipFactory(tenant=other_tenant, user=owner, role=Role.REVIEWER)
    page = new_page(None)
    page.goto(console_path("dashboard"))
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    page.get_by_label("Username").fill("olivia")
    page.get_by_label("Password").fill("not-her-password")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("Could not sign you in")

    page.get_by_label("Username").fill("olivia")
    page.get_by_label("Password").fill("pw-olivia")
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(re.compile(re.escape(console_path("dashboard")) + "$"))
    expect(page.get_by_role("heading", name=tenant.name, level=1)).to_be_visible()
    expect(page.get_by_text("Signed in as")).to_be_visible()
    screenshot(page)

    # The switcher, for a person in several tenants.
    switcher = page.get_by_role("navigation", name="Tenants")
    switcher.get_by_text(tenant.name).first.click()
    switcher.get_by_role("link", name=re.compile(other_tenant.name)).click()
    expect(page.get_by_role("heading", name=other_tenant.name, level=1)).to_be_visible()


def test_it_shows_the_dashboard_figures_and_charts(
    reviewer_page, tenant, agent, console_path, screenshot
):
    sensitivities = ["personal"] * 5 + ["internal"] * 3 + ["restricted", "public"]
    written = [
        write_ok(
            agent,
            subject=f"user:{index}",
            sensitivity=sensitivity,
            source={"kind": "interaction", "ref": f"interaction:{index}"},
        )
        for index, sensitivity in enumerate(sensitivities)
    ]
    agent.post(f"/api/v1/records/{written[0]['id']}/promotion-requests", {"reason": "seen twice"})
    write_ok(agent, subject="user:1", value="carrier_b", source={"kind": "tool_call", "ref": "t:1"})
    bot = Actor("credential", "bot-1", "checkout-bot")
    with tenant_scope(tenant.pk):
        MemoryRecord.objects.filter(pk__in=[r["id"] for r in written[5:8]]).update(
            trust="confirmed", expires_at=None
        )
        obligation_create(tenant=tenant, task_id="order-1", kind="ship", key="o-1", actor=bot)
        Obligation.objects.filter(key="o-1").update(deadline=timezone.now() - timedelta(hours=2))

    page = reviewer_page
    page.goto(console_path("dashboard"))
    expect(page.locator("#figure-live .stat-value")).to_have_text("10")
    expect(page.locator("#figure-open-promotions .stat-value")).to_have_text("1")
    expect(page.locator("#figure-open-conflicts .stat-value")).to_have_text("1")
    expect(page.get_by_role("img", name="Live memories by sensitivity and trust")).to_be_visible()
    personal = page.locator("#table-classes").get_by_role("row", name=re.compile("^Personal"))
    expect(personal).to_contain_text("5")
    screenshot(page)
    # The overdue figure opens the runs page, filtered to overdue obligations.
    page.locator("#figure-overdue-obligations a").click()
    expect(page.get_by_role("heading", name="Runs & obligations")).to_be_visible()
    expect(page.get_by_label("Only overdue")).to_be_checked()
    expect(page.locator("#obligations-table")).to_contain_text("o-1")


def test_it_issues_a_credential_and_shows_the_token_once(
    owner_page, tenant, console_path, screenshot
):
    page = owner_page
    page.goto(console_path("credentials"))
    page.get_by_label("Name").fill("checkout-agent (prod)")
    page.get_by_role("button", name="Issue credential").click()
    token_box = page.get_by_role("textbox", name="Token")
    expect(token_box).to_be_visible()
    expect(page.get_by_text("This token will not be shown again")).to_be_visible()
    expect(page.locator("#credential-table")).to_contain_text("checkout-agent (prod)")
    token = token_box.input_value()
    screenshot(page)

    with transaction.atomic():
        credential = credential_for_token(token)
    assert credential is not None, "the token shown works as the credential's token"
    with tenant_scope(tenant.pk):
        assert AgentCredential.objects.get(pk=credential.pk).name == "checkout-agent (prod)"
    # Shown once: the page reloaded lists the credential, never its token.
    page.reload()
    expect(page.locator("#credential-table")).to_contain_text("checkout-agent (prod)")
    assert token not in page.content()


def test_it_lists_runs_and_flags_overdue_obligations(member_page, tenant, console_path, screenshot):
    bot = Actor("credential", "bot-1", "checkout-bot")
    with tenant_scope(tenant.pk):
        run = run_open(tenant=tenant, task_id="order-4821", owner="service:checkout", actor=bot)
        checkpoint_write(run=run, step=0, state={"cart": "priced"}, actor=bot)
        checkpoint_write(run=run, step=1, state={"cart": "charged"}, actor=bot)
        for key, due in (("order-4821:2:ship", -3), ("order-4821:3:email", 24)):
            obligation_create(
                tenant=tenant, task_id="order-4821", kind=key.split(":")[-1], key=key, actor=bot
            )
            Obligation.objects.filter(key=key).update(
                deadline=timezone.now() + timedelta(hours=due)
            )
    page = member_page
    page.goto(console_path("runs"))
    expect(page.locator("#runs-table")).to_contain_text("step 1")
    late = page.locator("#obligations-table").get_by_role("row", name=re.compile("ship"))
    expect(late).to_contain_text("Overdue")
    on_time = page.locator("#obligations-table").get_by_role("row", name=re.compile("email"))
    expect(on_time).not_to_contain_text("Overdue")
    screenshot(page)
    page.get_by_label("Only overdue").check()
    page.get_by_role("button", name="Filter").click()
    expect(page.locator("#obligations-table tbody tr")).to_have_count(1)
    expect(page).to_have_url(re.compile(r"overdue=on"))
