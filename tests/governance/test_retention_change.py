"""A changed retention rule applies to the records already written: shortened, never
lengthened, previewed before it is saved, audited, and what it ends expires like any expiry."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.urls import reverse

from apps.audit.models import AuditEvent
from apps.derivations.models import Summary
from apps.records.models import MemoryRecord, RetentionRule
from apps.tenancy.context import tenant_scope
from apps.tenancy.models import Tenant
from tests.derivations.support import summarise
from tests.records.support import RECORDS, ts, write_ok

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


def url(tenant: Tenant) -> str:
    return reverse("console:retention", kwargs={"tenant_slug": tenant.slug})


def stored(tenant: Tenant, record_id: str) -> MemoryRecord:
    with tenant_scope(tenant.pk):
        return MemoryRecord.objects.get(pk=record_id)


def written_days_ago(tenant: Tenant, record_id: str, days: int) -> None:
    """Move a record's write (and the expiry it was given then) ``days`` into the past."""
    record = stored(tenant, record_id)
    shift = timedelta(days=days)
    with tenant_scope(tenant.pk):
        MemoryRecord.objects.filter(pk=record_id).update(
            written_at=record.written_at - shift,
            expires_at=record.expires_at - shift if record.expires_at else None,
        )


def personal(agent: Any, **overrides: Any) -> dict[str, Any]:
    return write_ok(agent, sensitivity="personal", **overrides)


def saved_rule(tenant: Tenant, sensitivity: str = "personal") -> RetentionRule | None:
    with tenant_scope(tenant.pk):
        return RetentionRule.objects.filter(sensitivity=sensitivity).first()


def retention_events(tenant: Tenant) -> list[AuditEvent]:
    with tenant_scope(tenant.pk):
        return list(AuditEvent.objects.filter(action="retention.set").order_by("seq"))


def hidden(html: str, name: str) -> str:
    match = re.search(rf'name="{name}" value="([^"]*)"', html)
    assert match, f"no hidden {name}"
    return match.group(1)


SHORTER_PERSONAL = {"sensitivity": "personal", "provisional_max": "10d", "confirmed_max": "365d"}


def test_shortening_a_rule_previews_what_it_does_to_existing_records(client, tenant, owner, agent):
    record = personal(agent)
    before = stored(tenant, record["id"]).expires_at
    client.force_login(owner)
    response = client.post(url(tenant), SHORTER_PERSONAL, headers=HTMX)
    html = response.content.decode()
    assert response.status_code == 200
    assert "shortens the lifetime of 1 record" in html
    assert "expires 0 records now" in html
    assert saved_rule(tenant) is None
    assert stored(tenant, record["id"]).expires_at == before
    assert retention_events(tenant) == []


def test_a_confirmed_shortening_shortens_existing_records_and_is_audited(
    client, tenant, owner, agent
):
    record = personal(agent)
    client.force_login(owner)
    form = SHORTER_PERSONAL
    preview = client.post(url(tenant), form).content.decode()
    response = client.post(
        url(tenant),
        {
            **form,
            "confirm": "1",
            "expected_expired": hidden(preview, "expected_expired"),
            "expected_shortened": hidden(preview, "expected_shortened"),
            "reason": "data minimisation review",
        },
    )
    assert response.status_code == 302
    kept = stored(tenant, record["id"])
    assert kept.expires_at == kept.observed_at + timedelta(days=10)
    [event] = retention_events(tenant)
    assert event.data["previous"]["provisional_max_days"] == 30
    assert event.data["provisional_max_days"] == 10
    assert (event.data["records_expired"], event.data["records_shortened"]) == (0, 1)
    assert event.data["reason"] == "data minimisation review"


def test_a_shortening_that_ends_records_expires_them_and_invalidates_their_summaries(
    client, tenant, owner, agent
):
    old = personal(agent)
    young = personal(agent, key="language", value="de", source__ref="interaction:2")
    summary = summarise(agent, [old["id"]])
    assert summary.status_code == 201, summary.content[:500]
    written_days_ago(tenant, old["id"], 20)
    client.force_login(owner)
    form = SHORTER_PERSONAL
    preview = client.post(url(tenant), form).content.decode()
    assert "expires 1 record now" in preview
    assert "shortens the lifetime of 1 record" in preview
    client.post(
        url(tenant),
        {
            **form,
            "confirm": "1",
            "expected_expired": "1",
            "expected_shortened": "1",
            "reason": "tighter policy",
        },
    )
    assert agent.get(f"{RECORDS}/{old['id']}").status_code == 404
    assert agent.get(f"{RECORDS}/{young['id']}").status_code == 200
    with tenant_scope(tenant.pk):
        invalidated = Summary.objects.get(pk=summary.json()["id"])
    assert invalidated.valid is False


def test_a_rule_never_lengthens_what_the_writer_asked(client, tenant, owner, agent):
    record = personal(agent, retention__ttl="P5D")
    asked = ts(record["expires_at"])
    client.force_login(owner)
    for provisional in ("10d", "60d"):
        response = client.post(
            url(tenant),
            {"sensitivity": "personal", "provisional_max": provisional, "confirmed_max": "400d"},
        )
        assert response.status_code == 302  # nothing existing changes: saved at once
        assert stored(tenant, record["id"]).expires_at == asked
    assert [e.data["records_shortened"] for e in retention_events(tenant)] == [0, 0]


def test_a_confirmation_needs_a_reason(client, tenant, owner, agent):
    record = personal(agent)
    before = stored(tenant, record["id"]).expires_at
    client.force_login(owner)
    response = client.post(
        url(tenant),
        {
            **SHORTER_PERSONAL,
            "confirm": "1",
            "expected_expired": "0",
            "expected_shortened": "1",
            "reason": " ",
        },
    )
    assert response.status_code == 400
    assert "Say why" in response.content.decode()
    assert saved_rule(tenant) is None
    assert stored(tenant, record["id"]).expires_at == before


def test_a_confirmation_whose_counts_changed_is_previewed_again(client, tenant, owner, agent):
    personal(agent)
    client.force_login(owner)
    form = SHORTER_PERSONAL
    client.post(url(tenant), form)
    personal(agent, key="language", value="de", source__ref="interaction:2")  # meanwhile
    response = client.post(
        url(tenant),
        {
            **form,
            "confirm": "1",
            "expected_expired": "0",
            "expected_shortened": "1",
            "reason": "tighter policy",
        },
        headers=HTMX,
    )
    html = response.content.decode()
    assert "changed since" in html
    assert "shortens the lifetime of 2 records" in html
    assert saved_rule(tenant) is None
