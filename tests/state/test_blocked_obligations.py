"""Obligations that can never commit: refused at creation when a dependency failed or was
cancelled (or is itself blocked), and shown as blocked in the console."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from apps.state.models import Obligation
from apps.tenancy.context import tenant_scope
from tests.api.support import assert_problem

from .support import OBLIGATIONS, create_obligation, ok

pytestmark = pytest.mark.django_db


def _end(agent: Any, obligation: dict[str, Any], how: str) -> None:
    ok(agent.post(f"{OBLIGATIONS}/{obligation['id']}/{how}", {"reason": "card declined"}))


@pytest.mark.parametrize("how", ["fail", "cancel"])
def test_it_refuses_an_obligation_depending_on_an_ended_one(agent, tenant, how):
    charge = create_obligation(agent, key="t:1:charge")
    _end(agent, charge, how)
    response = agent.post(
        OBLIGATIONS,
        {"task_id": "task-1", "kind": "email", "key": "t:2:email", "depends_on": [charge["id"]]},
    )
    body = assert_problem(response, 409)
    assert charge["id"] in body["detail"]
    assert body["never_committable"] == [charge["id"]]
    assert charge["id"] in body["errors"]["depends_on"][0]
    with tenant_scope(tenant.pk):
        assert not Obligation.objects.filter(key="t:2:email").exists()


def test_it_refuses_an_obligation_depending_on_a_blocked_one(agent, tenant):
    charge = create_obligation(agent, key="t:1:charge")
    receipt = create_obligation(agent, key="t:2:receipt", depends_on=[charge["id"]])
    _end(agent, charge, "fail")
    response = agent.post(
        OBLIGATIONS,
        {"task_id": "task-1", "kind": "email", "key": "t:3:email", "depends_on": [receipt["id"]]},
    )
    body = assert_problem(response, 409)
    assert body["never_committable"] == [receipt["id"]]
    assert charge["id"] in body["detail"]


def test_it_still_returns_an_existing_obligation_by_its_key(agent):
    charge = create_obligation(agent, key="t:1:charge")
    email = create_obligation(agent, key="t:2:email", depends_on=[charge["id"]])
    _end(agent, charge, "fail")
    again = agent.post(
        OBLIGATIONS,
        {"task_id": "task-1", "kind": "charge", "key": "t:2:email", "depends_on": [charge["id"]]},
    )
    assert again.status_code == 200
    assert again.json()["id"] == email["id"]


def test_the_console_shows_blocked_obligations(agent, tenant, member):
    charge = create_obligation(agent, key="t:1:charge")
    email = create_obligation(agent, key="t:2:email", depends_on=[charge["id"]])
    create_obligation(agent, key="t:3:receipt", depends_on=[email["id"]])
    waiting = create_obligation(agent, key="t:4:other")
    after_waiting = create_obligation(agent, key="t:5:after", depends_on=[waiting["id"]])
    _end(agent, charge, "fail")

    client = Client()
    client.force_login(member)
    page = client.get(reverse("console:runs", kwargs={"tenant_slug": tenant.slug}))
    assert page.status_code == 200
    html = page.content.decode()
    panel = html.split('id="blocked"', 1)[1].split("</section>", 1)[0]
    assert "t:2:email" in panel
    assert "t:3:receipt" in panel
    assert "t:1:charge" in panel  # the failed dependency is named
    assert "t:5:after" not in panel
    rows = html.split('id="obligations-table"', 1)[1]
    email_row = rows.split("t:2:email", 1)[1].split("</tr>", 1)[0]
    assert "Blocked" in email_row
    after_row = rows.split("t:5:after", 1)[1].split("</tr>", 1)[0]
    assert "Blocked" not in after_row
    assert after_waiting["state"] == "pending"
