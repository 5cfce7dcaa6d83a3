"""The dashboard's figures and the lists their links open agree: a figure of N opens N rows."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from apps.records.models import MemoryRecord
from apps.tenancy.context import tenant_scope
from tests.records.support import write_ok

pytestmark = pytest.mark.django_db


def _link(html: str, label_pattern: str) -> str:
    match = re.search(r'href="([^"]+)"[^>]*>\s*' + label_pattern, html)
    assert match, f"the dashboard links {label_pattern}"
    return match.group(1).replace("&amp;", "&")


def _rows(client, url: str) -> int:
    html = client.get(url).content.decode()
    return len(re.findall(r'<th scope="row">\s*<a href="/console/t/', html))


def test_the_provisional_figure_opens_exactly_its_memories(client, tenant, reviewer, agent):
    write_ok(agent, subject="user:1", value="carrier_a", source={"kind": "interaction", "ref": "a"})
    # A contradiction: the contender is a live version, not a current memory.
    write_ok(agent, subject="user:1", value="carrier_b", source={"kind": "interaction", "ref": "b"})
    write_ok(agent, subject="user:2", source={"kind": "interaction", "ref": "c"})
    client.force_login(reviewer)
    dashboard = client.get(reverse("console:dashboard", kwargs={"tenant_slug": tenant.slug}))
    html = dashboard.content.decode()
    url = _link(html, r"2 provisional")
    assert "trust=provisional" in url
    assert _rows(client, url) == 2


def test_the_expiring_figures_open_the_memories_expiring_in_that_window(
    client, tenant, reviewer, agent
):
    soon = write_ok(agent, subject="user:1", source={"kind": "interaction", "ref": "a"})
    write_ok(agent, subject="user:2", source={"kind": "interaction", "ref": "b"})
    with tenant_scope(tenant.pk):
        MemoryRecord.objects.filter(pk=soon["id"]).update(
            expires_at=timezone.now() + timedelta(days=3)
        )
    client.force_login(reviewer)
    html = client.get(reverse("console:dashboard", kwargs={"tenant_slug": tenant.slug}))
    url = re.search(r'href="([^"]*expiring_within=7[^"]*)"', html.content.decode())
    assert url, "the 7-day figure links a filtered list"
    assert _rows(client, url.group(1).replace("&amp;", "&")) == 1


def test_an_expiry_window_lists_soonest_expiry_first_and_pages_on(
    client, tenant, reviewer, agent, monkeypatch
):
    monkeypatch.setattr("apps.console.memories.PAGE_SIZE", 2)
    days = {"user:c": 5, "user:a": 1, "user:d": 6, "user:b": 3}
    for subject, in_days in days.items():
        written = write_ok(agent, subject=subject, source={"kind": "interaction", "ref": subject})
        with tenant_scope(tenant.pk):
            MemoryRecord.objects.filter(pk=written["id"]).update(
                expires_at=timezone.now() + timedelta(days=in_days)
            )
    client.force_login(reviewer)
    memories = reverse("console:memories", kwargs={"tenant_slug": tenant.slug})
    first = client.get(memories, {"expiring_within": "7", "versions": "current"}).content.decode()
    assert re.findall(r">(user:[a-d]) ·", first) == ["user:a", "user:b"]
    later = re.search(r'href="([^"]+)"[^>]*rel="next"', first)
    assert later
    second = client.get(later.group(1).replace("&amp;", "&")).content.decode()
    assert re.findall(r">(user:[a-d]) ·", second) == ["user:c", "user:d"]
    assert "Soonest" in second
