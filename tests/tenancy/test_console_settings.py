"""The console's Settings page: the tenant's trust and read-audit policy. Administrators
change it (audited), auditors read it, a contradiction is a form error that changes
nothing."""

from __future__ import annotations

import pytest
from django.urls import reverse

from apps.audit.models import AuditEvent
from apps.tenancy.context import tenant_scope
from apps.tenancy.models import Tenant

pytestmark = pytest.mark.django_db

POLICY = ("auto_promote_on_second_observation", "promotion_requires_person", "audit_reads")


def settings_url(tenant):
    return reverse("console:settings", kwargs={"tenant_slug": tenant.slug})


def policy_of(tenant):
    return Tenant.objects.values_list(*POLICY).get(pk=tenant.pk)


def test_an_admin_sets_the_policy_and_it_is_audited(client, tenant, owner):
    client.force_login(owner)
    page = client.get(settings_url(tenant))
    assert page.status_code == 200
    assert "Only a person may confirm a record" in page.content.decode()
    saved = client.post(
        settings_url(tenant), {"promotion_requires_person": "on", "audit_reads": "all"}
    )
    assert saved.status_code == 302
    assert policy_of(tenant) == (False, True, "all")
    with tenant_scope(tenant.pk):
        [event] = AuditEvent.objects.filter(action="tenant.policy")
    assert event.actor_id == str(owner.pk)
    assert event.data == {
        "before": {"promotion_requires_person": False, "audit_reads": "restricted"},
        "after": {"promotion_requires_person": True, "audit_reads": "all"},
    }


def test_it_refuses_a_contradictory_policy_with_a_form_error(client, tenant, owner):
    client.force_login(owner)
    response = client.post(
        settings_url(tenant),
        {
            "auto_promote_on_second_observation": "on",
            "promotion_requires_person": "on",
            "audit_reads": "restricted",
        },
    )
    assert response.status_code == 400
    assert "cannot confirm a record at once while promotions need a person" in (
        response.content.decode()
    )
    assert policy_of(tenant) == (False, False, "restricted")


def test_it_refuses_an_unknown_read_audit_choice(client, tenant, owner):
    client.force_login(owner)
    response = client.post(settings_url(tenant), {"audit_reads": "sometimes"})
    assert response.status_code == 400
    assert policy_of(tenant) == (False, False, "restricted")


def test_an_auditor_reads_the_policy_but_cannot_change_it(client, tenant, auditor):
    client.force_login(auditor)
    page = client.get(settings_url(tenant))
    assert page.status_code == 200
    assert "those that return a restricted memory" in page.content.decode()
    refused = client.post(settings_url(tenant), {"audit_reads": "off"})
    assert refused.status_code == 403
    assert policy_of(tenant) == (False, False, "restricted")


def test_a_member_cannot_open_it(client, tenant, member):
    client.force_login(member)
    assert client.get(settings_url(tenant)).status_code == 403
