"""The tenant dashboard's memory figures, charts and links."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from apps.console.dashboard import BarSpec, bar_chart, console_url
from apps.core.actors import Actor
from apps.records.models import MemoryRecord
from apps.state.models import Obligation
from apps.state.services import obligation_create
from apps.tenancy.context import tenant_scope
from apps.tenancy.models import Tenant
from apps.tenancy.permissions import ALL_PERMISSIONS, VIEW_MEMORIES
from tests.records.support import write_ok

pytestmark = pytest.mark.django_db


def dashboard_url(tenant: Tenant) -> str:
    return reverse("console:dashboard", kwargs={"tenant_slug": tenant.slug})


def signed_in(client: Client, user: Any) -> Client:
    client.force_login(user)
    return client


def write(agent: Any, subject: str, **overrides: Any) -> dict[str, Any]:
    overrides.setdefault("source", {"kind": "interaction", "ref": subject})
    return write_ok(agent, subject=subject, **overrides)


def set_fields(tenant: Tenant, record_id: str, **fields: Any) -> None:
    """Move a record to a state the test needs without going through review (set-up only)."""
    with tenant_scope(tenant.pk):
        MemoryRecord.objects.filter(pk=record_id).update(**fields)


def figures_of(client: Client, tenant: Tenant) -> Any:
    return client.get(dashboard_url(tenant)).context["dashboard"].memory


def test_it_counts_live_memories_by_trust_and_sensitivity(client, tenant, member, agent):
    for index in range(3):
        write(agent, f"user:p{index}", sensitivity="personal")
    confirmed = write(agent, "user:i1", sensitivity="internal")
    set_fields(tenant, confirmed["id"], trust="confirmed")
    expired = write(agent, "user:gone", sensitivity="public")
    set_fields(tenant, expired["id"], expires_at=timezone.now() - timedelta(minutes=1))

    figures = figures_of(signed_in(client, member), tenant)
    by_class = {item.sensitivity: (item.provisional, item.confirmed) for item in figures.by_class}
    assert by_class == {
        "public": (0, 0),
        "internal": (0, 1),
        "personal": (3, 0),
        "restricted": (0, 0),
    }
    assert (figures.total, figures.provisional, figures.confirmed) == (4, 3, 1)


def test_it_counts_only_the_current_version_of_a_fact(client, tenant, member, agent):
    write(agent, "user:1", value="carrier_a")
    contender = write(
        agent, "user:1", value="carrier_b", source={"kind": "interaction", "ref": "x2"}
    )
    assert contender["conflict"], "a different value opens a conflict"
    figures = figures_of(signed_in(client, member), tenant)
    assert figures.total == 1
    assert figures.open_conflicts == 1


def test_it_counts_what_expires_within_7_and_30_days(client, tenant, member, agent):
    soon = write(agent, "user:soon")
    later = write(agent, "user:later")
    write(agent, "user:never", sensitivity="public", retention={"basis": "indefinite"})
    set_fields(tenant, soon["id"], expires_at=timezone.now() + timedelta(days=3))
    set_fields(tenant, later["id"], expires_at=timezone.now() + timedelta(days=20))
    figures = figures_of(signed_in(client, member), tenant)
    assert {item.days: item.count for item in figures.expiring} == {7: 1, 30: 2}


def test_it_counts_open_promotion_requests(client, tenant, member, agent):
    record = write(agent, "user:promote")
    response = agent.post(
        f"/api/v1/records/{record['id']}/promotion-requests",
        {"evidence": {"ticket": "T-1"}, "reason": "user confirmed by phone"},
    )
    assert response.status_code in (200, 201), response.content[:500]
    assert figures_of(signed_in(client, member), tenant).open_promotions == 1


def test_it_counts_and_links_overdue_obligations(client, tenant, member):
    actor = Actor.system("tests")
    with tenant_scope(tenant.pk):
        for key in ("late", "fine"):
            obligation_create(tenant=tenant, task_id="t", kind="charge", key=key, actor=actor)
        Obligation.objects.filter(key="late").update(deadline=timezone.now() - timedelta(hours=1))
    response = signed_in(client, member).get(dashboard_url(tenant))
    figures = response.context["dashboard"].memory
    assert (figures.pending_obligations, figures.overdue_obligations) == (2, 1)
    overdue = next(i for i in response.context["page"].attention if i.key == "overdue-obligations")
    runs = reverse("console:runs", kwargs={"tenant_slug": tenant.slug})
    assert overdue.url == f"{runs}?overdue=1"
    assert f'href="{runs}?overdue=1"' in response.content.decode()


def test_it_keeps_other_tenants_out_of_the_figures(
    client, tenant, other_tenant, member, agent, other_agent
):
    write(other_agent, "user:rival")
    write(agent, "user:own")
    assert figures_of(signed_in(client, member), tenant).total == 1


def test_it_draws_the_charts_as_labelled_svg_with_a_data_table(client, tenant, member, agent):
    write(agent, "user:1", sensitivity="restricted")
    html = signed_in(client, member).get(dashboard_url(tenant)).content.decode()
    assert 'id="chart-memory"' in html
    assert 'role="img"' in html
    assert "Restricted, provisional: 1" in html  # the chart's text description
    assert 'id="table-classes"' in html
    assert "<script" not in html.split('id="chart-memory"')[1].split("</figure>")[0]


def test_it_says_what_to_do_when_there_are_no_memories(client, tenant, owner):
    html = signed_in(client, owner).get(dashboard_url(tenant)).content.decode()
    assert "No live memories yet" in html
    assert 'id="table-classes"' not in html


def test_it_reads_the_figures_in_a_number_of_queries_that_does_not_grow(
    client, tenant, owner, agent
):
    write(agent, "user:first")
    signed_in(client, owner)
    client.get(dashboard_url(tenant))
    with CaptureQueriesContext(connection) as few:
        client.get(dashboard_url(tenant))
    for index in range(12):
        record = write(agent, f"user:n{index}", sensitivity=["public", "restricted"][index % 2])
        agent.post(f"/api/v1/records/{record['id']}/promotion-requests", {"reason": "check"})
    with CaptureQueriesContext(connection) as many:
        client.get(dashboard_url(tenant))
    assert len(few.captured_queries) > 3, "the page's own queries were captured"
    assert len(many.captured_queries) == len(few.captured_queries)


# --- links and charts ---------------------------------------------------------------------------


def test_it_links_a_figure_only_to_a_page_the_person_may_open(tenant):
    member_perms = frozenset({VIEW_MEMORIES})
    kwargs = {"tenant_slug": tenant.slug}
    assert console_url("console:review", perms=member_perms, **kwargs) is None
    assert console_url("console:runs", perms=member_perms, query={"overdue": "1"}, **kwargs) == (
        reverse("console:runs", kwargs=kwargs) + "?overdue=1"
    )
    assert console_url("console:no-such-page", perms=frozenset(ALL_PERMISSIONS), **kwargs) is None


def test_it_scales_bars_to_the_largest_value_and_keeps_small_ones_visible():
    chart = bar_chart("t", [BarSpec("big", 1000), BarSpec("tiny", 1), BarSpec("none", 0)])
    big, tiny, none = chart.bars
    assert big.width == chart.bar_area
    assert tiny.width == 2
    assert none.width == 0
    assert [bar.y for bar in chart.bars] == sorted(bar.y for bar in chart.bars)


def test_it_draws_no_bars_when_everything_is_zero():
    chart = bar_chart("t", [BarSpec("a", 0), BarSpec("b", 0)])
    assert [bar.width for bar in chart.bars] == [0, 0]
