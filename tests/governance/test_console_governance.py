"""The console's retention rules and legal holds: edit, validate, place, lift, and who may."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from apps.audit.models import AuditEvent
from apps.core.actors import Actor
from apps.governance.services import legal_hold_place, retention_rule_set
from apps.records.models import Fact, LegalHold, RetentionRule
from apps.tenancy.context import tenant_scope
from apps.tenancy.models import Tenant
from tests.factories import LegalHoldFactory, bulk_save
from tests.records.support import write_ok

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


def url(tenant: Tenant, name: str, **kwargs: Any) -> str:
    return reverse(f"console:{name}", kwargs={"tenant_slug": tenant.slug, **kwargs})


def rules(tenant: Tenant) -> dict[str, tuple[timedelta, timedelta | None]]:
    with tenant_scope(tenant.pk):
        return {
            r.sensitivity: (r.provisional_max, r.confirmed_max) for r in RetentionRule.objects.all()
        }


def audit_actions(tenant: Tenant, prefix: str) -> list[str]:
    with tenant_scope(tenant.pk):
        return list(
            AuditEvent.objects.filter(action__startswith=prefix).values_list("action", flat=True)
        )


def holds_of(tenant: Tenant) -> list[LegalHold]:
    with tenant_scope(tenant.pk):
        return list(LegalHold.objects.order_by("placed_at"))


def place(tenant: Tenant, **fields: Any) -> LegalHold:
    with tenant_scope(tenant.pk):
        hold: LegalHold = legal_hold_place(
            tenant=tenant,
            actor=Actor.system("tests"),
            reason=fields.pop("reason", "case"),
            **fields,
        )
        return hold


def nonce_in(html: str) -> str:
    match = re.search(r'name="nonce" value="([^"]+)"', html)
    assert match
    return match.group(1)


# --- retention rules --------------------------------------------------------------------------


def test_it_shows_each_class_with_its_rule_or_default(client, tenant, owner):
    with tenant_scope(tenant.pk):
        retention_rule_set(
            tenant=tenant,
            sensitivity="personal",
            provisional_max=timedelta(days=10),
            confirmed_max=timedelta(days=100),
            actor=Actor.system("tests"),
        )
    client.force_login(owner)
    html = client.get(url(tenant, "retention")).content.decode()
    for sensitivity in ("public", "internal", "personal", "restricted"):
        assert f'id="rule-{sensitivity}"' in html
    assert 'value="10d"' in html
    assert 'value="100d"' in html
    assert "Set for this tenant" in html
    assert 'value="none"' in html  # public's default: no confirmed limit


def test_an_admin_changes_a_class_inline_and_it_is_audited(client, tenant, owner):
    client.force_login(owner)
    response = client.post(
        url(tenant, "retention"),
        {"sensitivity": "internal", "provisional_max": "2w", "confirmed_max": "400d"},
        headers=HTMX,
    )
    html = response.content.decode()
    assert "<html" not in html
    assert html.lstrip().startswith('<tr id="rule-internal"')
    assert "Saved." in html
    assert 'hx-swap-oob="innerHTML"' in html  # the message
    assert rules(tenant) == {"internal": (timedelta(days=14), timedelta(days=400))}
    assert audit_actions(tenant, "retention.") == ["retention.set"]


def test_without_js_a_change_redirects(client, tenant, owner):
    client.force_login(owner)
    response = client.post(
        url(tenant, "retention"),
        {"sensitivity": "restricted", "provisional_max": "12h", "confirmed_max": "30d"},
    )
    assert response.status_code == 302
    assert rules(tenant) == {"restricted": (timedelta(hours=12), timedelta(days=30))}


def test_no_limit_is_allowed_where_the_default_has_none(client, tenant, owner):
    client.force_login(owner)
    client.post(
        url(tenant, "retention"),
        {"sensitivity": "public", "provisional_max": "100d", "confirmed_max": "none"},
    )
    assert rules(tenant) == {"public": (timedelta(days=100), None)}


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ({"provisional_max": "0d", "confirmed_max": "30d"}, "Must be longer than zero."),
        ({"provisional_max": "soon", "confirmed_max": "30d"}, "Write a length such as"),
        ({"provisional_max": "", "confirmed_max": "30d"}, "This field is required."),
        ({"provisional_max": "60d", "confirmed_max": "30d"}, "may not expire before provisional"),
        ({"provisional_max": "7d", "confirmed_max": "none"}, "Personal records need a limit"),
        ({"provisional_max": "7d", "confirmed_max": "-3d"}, "Write a length such as 365d"),
        ({"provisional_max": "999999d", "confirmed_max": ""}, "At most 100 years."),
    ],
)
def test_bad_lifetimes_are_refused_with_no_change(client, tenant, owner, data, error):
    client.force_login(owner)
    htmx = client.post(url(tenant, "retention"), {"sensitivity": "personal", **data}, headers=HTMX)
    html = htmx.content.decode()
    assert error in html
    assert "Not saved" in html
    assert html.lstrip().startswith('<tr id="rule-personal"')
    plain = client.post(url(tenant, "retention"), {"sensitivity": "personal", **data})
    assert plain.status_code == 400
    assert error in plain.content.decode()
    assert rules(tenant) == {}
    assert audit_actions(tenant, "retention.") == []


def test_an_unknown_class_is_refused(client, tenant, owner):
    client.force_login(owner)
    response = client.post(
        url(tenant, "retention"),
        {"sensitivity": "secret", "provisional_max": "1d", "confirmed_max": "2d"},
    )
    assert response.status_code == 400
    assert rules(tenant) == {}


def test_an_auditor_reads_the_rules_but_cannot_change_them(client, tenant, auditor):
    client.force_login(auditor)
    html = client.get(url(tenant, "retention")).content.decode()
    assert "Read only" in html
    assert "<input" not in html.split('id="main"')[1]
    assert "30 days" in html  # personal's default, in words
    response = client.post(
        url(tenant, "retention"),
        {"sensitivity": "personal", "provisional_max": "1d", "confirmed_max": "2d"},
    )
    assert response.status_code == 403
    assert rules(tenant) == {}


@pytest.mark.parametrize("persona", ["member", "reviewer"])
def test_retention_and_holds_need_a_governance_role(client, tenant, persona, request):
    hold = place(tenant, subject="user:1")
    client.force_login(request.getfixturevalue(persona))
    assert client.get(url(tenant, "retention")).status_code == 403
    assert client.get(url(tenant, "holds")).status_code == 403
    assert client.post(url(tenant, "hold-lift", hold_id=hold.pk)).status_code == 403
    assert holds_of(tenant)[0].lifted_at is None


def test_an_outsider_gets_404(client, tenant, outsider):
    hold = place(tenant, subject="user:1")
    client.force_login(outsider)
    assert client.get(url(tenant, "retention")).status_code == 404
    assert client.get(url(tenant, "holds")).status_code == 404
    assert client.post(url(tenant, "hold-lift", hold_id=hold.pk)).status_code == 404


def test_the_rules_page_costs_the_same_queries_however_many_rules(client, tenant, owner):
    client.force_login(owner)
    with CaptureQueriesContext(connection) as none_set:
        client.get(url(tenant, "retention"))
    with tenant_scope(tenant.pk):
        for sensitivity in ("public", "internal", "personal", "restricted"):
            retention_rule_set(
                tenant=tenant,
                sensitivity=sensitivity,
                provisional_max=timedelta(days=1),
                confirmed_max=timedelta(days=2),
                actor=Actor.system("tests"),
            )
    with CaptureQueriesContext(connection) as all_set:
        client.get(url(tenant, "retention"))
    assert len(all_set.captured_queries) == len(none_set.captured_queries)


# --- legal holds ------------------------------------------------------------------------------


def hold_form(client: Any, tenant: Tenant) -> str:
    return nonce_in(client.get(url(tenant, "holds")).content.decode())


def test_an_admin_places_a_hold_on_a_subject(client, tenant, owner):
    client.force_login(owner)
    nonce = hold_form(client, tenant)
    response = client.post(
        url(tenant, "holds"),
        {"target": "subject", "value": "user:42", "reason": "case 2026-114", "nonce": nonce},
    )
    assert response.status_code == 302
    [hold] = holds_of(tenant)
    assert (hold.subject, hold.fact_id, hold.reason) == ("user:42", None, "case 2026-114")
    assert hold.placed_by_label == "olivia"
    assert audit_actions(tenant, "legal_hold.") == ["legal_hold.place"]
    html = client.get(url(tenant, "holds")).content.decode()
    assert f'id="hold-{hold.pk}"' in html
    assert "user:42" in html


def test_a_hold_on_a_record_holds_its_fact(client, tenant, owner, agent):
    record = write_ok(agent, subject="user:7", key="home")
    client.force_login(owner)
    nonce = hold_form(client, tenant)
    response = client.post(
        url(tenant, "holds"),
        {"target": "record", "value": record["id"], "reason": "audit", "nonce": nonce},
        headers=HTMX,
    )
    html = response.content.decode()
    assert "<html" not in html
    assert 'id="place-panel"' in html
    assert (
        'id="hold-results" aria-labelledby="holds-heading" class="results" hx-swap-oob="true"'
        in html
    )
    [hold] = holds_of(tenant)
    with tenant_scope(tenant.pk):
        assert hold.fact_id == Fact.objects.get(subject="user:7", key="home").pk
    assert hold.subject == ""
    assert "home" in html


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ({"target": "subject", "value": "user:1", "reason": ""}, "This field is required."),
        ({"target": "subject", "value": "", "reason": "x"}, "This field is required."),
        ({"target": "record", "value": "not-a-uuid", "reason": "x"}, "A record id looks like"),
        (
            {"target": "record", "value": "00000000-0000-0000-0000-000000000009", "reason": "x"},
            "No live record with this id",
        ),
        ({"target": "planet", "value": "user:1", "reason": "x"}, "Select a valid choice"),
    ],
)
def test_bad_hold_input_is_an_error_and_places_nothing(client, tenant, owner, data, error):
    client.force_login(owner)
    nonce = hold_form(client, tenant)
    htmx = client.post(url(tenant, "holds"), {**data, "nonce": nonce}, headers=HTMX)
    assert error in htmx.content.decode()
    assert "<html" not in htmx.content.decode()
    plain = client.post(url(tenant, "holds"), {**data, "nonce": nonce})
    assert plain.status_code == 400
    assert holds_of(tenant) == []
    assert audit_actions(tenant, "legal_hold.") == []


def test_another_tenants_record_cannot_be_held(client, tenant, owner, other_agent):
    theirs = write_ok(other_agent, subject="user:7")
    client.force_login(owner)
    nonce = hold_form(client, tenant)
    response = client.post(
        url(tenant, "holds"),
        {"target": "record", "value": theirs["id"], "reason": "x", "nonce": nonce},
    )
    assert "No live record with this id" in response.content.decode()
    assert holds_of(tenant) == []


def test_a_double_submitted_hold_is_placed_once(client, tenant, owner):
    client.force_login(owner)
    data = {
        "target": "subject",
        "value": "user:1",
        "reason": "x",
        "nonce": hold_form(client, tenant),
    }
    client.post(url(tenant, "holds"), data)
    again = client.post(url(tenant, "holds"), data)
    assert again.status_code == 302
    assert len(holds_of(tenant)) == 1


def test_an_admin_lifts_a_hold_once(client, tenant, owner):
    hold = place(tenant, subject="user:1")
    client.force_login(owner)
    confirm_page = client.get(url(tenant, "hold-lift", hold_id=hold.pk)).content.decode()
    assert "Lift hold" in confirm_page
    lift = url(tenant, "hold-lift", hold_id=hold.pk)
    response = client.post(lift, {"reason": "case settled"}, headers=HTMX)
    html = response.content.decode()
    assert html.lstrip().startswith(f'<tr id="hold-{hold.pk}"')
    assert "Lifted" in html
    again = client.post(lift, {"reason": "case settled"})
    assert again.status_code == 302
    [lifted] = holds_of(tenant)
    assert lifted.lifted_at is not None
    assert lifted.lifted_by_label == "olivia"
    assert audit_actions(tenant, "legal_hold.lift") == ["legal_hold.lift"]


def test_the_list_shows_active_or_lifted_holds(client, tenant, owner):
    active = place(tenant, subject="user:1")
    lifted = place(tenant, subject="user:2")
    with tenant_scope(tenant.pk):
        from apps.governance.services import legal_hold_lift

        legal_hold_lift(hold=lifted, actor=Actor.system("tests"), reason="case closed")
    client.force_login(owner)
    default = client.get(url(tenant, "holds")).content.decode()
    assert f'id="hold-{active.pk}"' in default
    assert f'id="hold-{lifted.pk}"' not in default
    only_lifted = client.get(url(tenant, "holds"), {"state": "lifted"}, headers=HTMX)
    html = only_lifted.content.decode()
    assert "<html" not in html
    assert f'id="hold-{lifted.pk}"' in html
    assert f'id="hold-{active.pk}"' not in html


def test_holds_are_paged_without_overlap(client, tenant, owner):
    now = timezone.now()
    bulk_save(
        [
            LegalHoldFactory.build(
                tenant=tenant,
                subject=f"user:{i}",
                reason="r",
                placed_by_label="t",
                placed_at=now - timedelta(seconds=i),
            )
            for i in range(53)
        ]
    )
    client.force_login(owner)
    first = client.get(url(tenant, "holds")).content.decode()
    older = re.search(r'href="([^"]+)"[^>]*rel="next"', first)
    assert older
    second = client.get(older.group(1).replace("&amp;", "&")).content.decode()
    ids = re.findall(r'<tr id="hold-([0-9a-f-]{36})"', first) + re.findall(
        r'<tr id="hold-([0-9a-f-]{36})"', second
    )
    assert len(ids) == len(set(ids)) == 53


def test_another_tenants_hold_is_not_found(client, tenant, other_tenant, owner):
    theirs = place(other_tenant, subject="user:1")
    client.force_login(owner)
    assert client.get(url(tenant, "hold-lift", hold_id=theirs.pk)).status_code == 404
    assert client.post(url(tenant, "hold-lift", hold_id=theirs.pk)).status_code == 404
    with tenant_scope(other_tenant.pk):
        assert LegalHold.objects.get(pk=theirs.pk).lifted_at is None


def test_an_auditor_reads_holds_but_cannot_place_or_lift(client, tenant, auditor):
    hold = place(tenant, subject="user:1")
    client.force_login(auditor)
    html = client.get(url(tenant, "holds")).content.decode()
    assert f'id="hold-{hold.pk}"' in html
    assert "Read only" in html
    assert url(tenant, "hold-lift", hold_id=hold.pk) not in html
    data = {"target": "subject", "value": "user:2", "reason": "x", "nonce": "n"}
    assert client.post(url(tenant, "holds"), data).status_code == 403
    assert client.post(url(tenant, "hold-lift", hold_id=hold.pk)).status_code == 403
    assert len(holds_of(tenant)) == 1
    assert holds_of(tenant)[0].lifted_at is None


def test_the_hold_list_costs_the_same_queries_for_few_or_many(client, tenant, owner, agent):
    client.force_login(owner)
    record = write_ok(agent, subject="user:7")
    with tenant_scope(tenant.pk):
        fact = Fact.objects.get(pk=record["fact_id"]) if "fact_id" in record else Fact.objects.get()
    place(tenant, fact=fact)
    with CaptureQueriesContext(connection) as few:
        client.get(url(tenant, "holds"))
    for i in range(10):
        place(tenant, subject=f"user:{i}")
        place(tenant, fact=fact)
    with CaptureQueriesContext(connection) as many:
        client.get(url(tenant, "holds"))
    assert len(many.captured_queries) == len(few.captured_queries)
