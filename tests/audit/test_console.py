"""The console's audit log page: filters, keyset pages and chain verification."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.urls import reverse

from apps.audit.models import AuditEvent
from apps.audit.selectors import ChainCheck
from apps.audit.services import audit_record
from apps.core.actors import Actor
from apps.tenancy.context import tenant_scope
from apps.tenancy.models import Tenant

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


def audit_url(tenant: Tenant, name: str = "audit") -> str:
    return reverse(f"console:{name}", kwargs={"tenant_slug": tenant.slug})


def record_events(tenant: Tenant, count: int, action: str = "test.event", **kwargs: Any) -> None:
    with tenant_scope(tenant.pk):
        for index in range(count):
            audit_record(
                tenant=tenant,
                actor=kwargs.get("actor", Actor.system("tests")),
                action=action,
                object_type="thing",
                object_id=kwargs.get("object_id", f"obj-{index}"),
            )


def seqs_on(html: str) -> list[int]:
    return [int(n) for n in re.findall(r'<td class="num">(\d+)</td>', html)]


def test_it_lists_the_tenants_events_newest_first(client, tenant, owner):
    client.force_login(owner)
    html = client.get(audit_url(tenant)).content.decode()
    with tenant_scope(tenant.pk):
        expected = list(AuditEvent.objects.order_by("-seq").values_list("seq", flat=True))
    assert seqs_on(html) == expected
    assert "membership.set" in html


def test_it_shows_only_the_tenants_own_events(client, tenant, other_tenant, owner, outsider):
    record_events(other_tenant, 3, action="rival.secret")
    client.force_login(owner)
    assert "rival.secret" not in client.get(audit_url(tenant)).content.decode()


def test_it_filters_by_action_prefix(client, tenant, owner):
    record_events(tenant, 2, action="credential.issue")
    client.force_login(owner)
    response = client.get(audit_url(tenant), {"action": "credential"})
    events = response.context["page"].events
    assert len(events) == 2
    assert {event.action for event in events} == {"credential.issue"}


def test_it_filters_by_actor_label_or_id(client, tenant, owner):
    record_events(tenant, 1, action="by.olivia", actor=Actor.for_user(owner))
    client.force_login(owner)
    by_label = client.get(audit_url(tenant), {"actor": "olivia"}).context["page"].events
    by_id = client.get(audit_url(tenant), {"actor": str(owner.pk)}).context["page"].events
    assert [e.action for e in by_label] == [e.action for e in by_id] == ["by.olivia"]


def test_it_filters_by_object_id_and_time(client, tenant, owner):
    record_events(tenant, 1, object_id="needle")
    client.force_login(owner)
    found = client.get(audit_url(tenant), {"object_id": "needle"}).context["page"].events
    assert [e.object_id for e in found] == ["needle"]
    later = client.get(audit_url(tenant), {"since": "2999-01-01T00:00"}).context["page"].events
    assert later == []


def test_it_shows_a_form_error_for_a_bad_since(client, tenant, owner):
    client.force_login(owner)
    response = client.get(audit_url(tenant), {"since": "yesterday-ish"})
    html = response.content.decode()
    assert response.status_code == 200
    assert "Check the filters" in html
    assert response.context["page"] is None


def test_it_pages_through_a_long_log_by_sequence(client, tenant, owner):
    record_events(tenant, 120)
    client.force_login(owner)
    first = client.get(audit_url(tenant))
    older_url = first.context["older_url"]
    assert older_url
    assert "before=" in older_url
    second = client.get(older_url)
    first_seqs = seqs_on(first.content.decode())
    second_seqs = seqs_on(second.content.decode())
    with tenant_scope(tenant.pk):
        in_order = list(AuditEvent.objects.order_by("-seq").values_list("seq", flat=True))
    assert first_seqs == in_order[:50]
    assert second_seqs == in_order[50:100]
    back = client.get(second.context["newer_url"])
    assert seqs_on(back.content.decode()) == first_seqs


def test_it_keeps_the_filters_when_paging(client, tenant, owner):
    record_events(tenant, 60, action="bulk.thing")
    client.force_login(owner)
    response = client.get(audit_url(tenant), {"action": "bulk"})
    assert "action=bulk" in response.context["older_url"]
    older = client.get(response.context["older_url"]).context["page"].events
    assert len(older) == 10
    assert {event.action for event in older} == {"bulk.thing"}


def test_it_answers_htmx_filtering_with_the_results_only(client, tenant, owner):
    client.force_login(owner)
    response = client.get(audit_url(tenant), {"action": "membership"}, headers=HTMX)
    html = response.content.decode()
    assert "<html" not in html
    assert html.lstrip().startswith('<section id="audit-results"')


def test_it_verifies_an_intact_chain(client, tenant, auditor):
    record_events(tenant, 5)
    client.force_login(auditor)
    response = client.get(audit_url(tenant, "audit-verify"))
    assert response.status_code == 200
    assert response.context["chain_check"].ok
    assert "Chain intact" in response.content.decode()


def test_it_answers_htmx_verification_with_the_result_only(client, tenant, auditor):
    client.force_login(auditor)
    html = client.get(audit_url(tenant, "audit-verify"), headers=HTMX).content.decode()
    assert "<html" not in html
    assert "Chain intact" in html


def test_it_reports_where_a_broken_chain_breaks(client, tenant, owner, monkeypatch):
    # Breaking a real chain needs the owner role (the application cannot UPDATE audit rows);
    # the chain check itself is the audit app's to test. Here: the page reports it plainly.
    broken = ChainCheck(ok=False, checked=1, broken_seq=2, problem="event content does not match")
    monkeypatch.setattr("apps.audit.views.audit_chain_verify", lambda: broken)
    client.force_login(owner)
    html = client.get(audit_url(tenant, "audit-verify")).content.decode()
    assert "Chain broken at event #2" in html
    assert "event content does not match" in html


def test_it_lists_events_without_a_query_per_row(
    client, tenant, owner, django_assert_max_num_queries
):
    record_events(tenant, 60)
    client.force_login(owner)
    with django_assert_max_num_queries(14):
        response = client.get(audit_url(tenant))
    assert len(seqs_on(response.content.decode())) == 50


def test_it_shows_event_details_as_text_not_python_reprs(client, tenant, owner):
    with tenant_scope(tenant.pk):
        audit_record(
            tenant=tenant,
            actor=Actor.system("tests"),
            action="credential.issue",
            data={"actions": ["read", "write"], "previous_role": None},
        )
    client.force_login(owner)
    html = client.get(audit_url(tenant), {"action": "credential.issue"}).content.decode()
    assert "<dd>read, write</dd>" in html
    assert "<dd>—</dd>" in html
    assert "[&#x27;read&#x27;" not in html
