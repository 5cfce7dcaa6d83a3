"""The console shell: sign-in, tenant switcher, dashboard, credentials, members, and the admin."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from apps.audit.models import AuditEvent
from apps.core.actors import Actor
from apps.tenancy.context import tenant_scope
from apps.tenancy.models import AgentCredential, Membership, Role, Tenant
from tests.factories import AgentCredentialFactory, MembershipFactory, UserFactory, person

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


def url(name: str, tenant: Tenant, **kwargs: Any) -> str:
    return reverse(f"console:{name}", kwargs={"tenant_slug": tenant.slug, **kwargs})


def signed_in(client: Client, user: Any) -> Client:
    client.force_login(user)
    return client


def nonce_of(html: str) -> str:
    match = re.search(r'name="nonce" value="([^"]+)"', html)
    assert match, "the issue form carries a nonce"
    return match.group(1)


def credentials_of(tenant: Tenant) -> list[AgentCredential]:
    with tenant_scope(tenant.pk):
        return list(AgentCredential.objects.order_by("created_at"))


def memberships_in(tenant: Tenant) -> dict[str, str]:
    with tenant_scope(tenant.pk):
        return dict(Membership.objects.values_list("user__username", "role"))


def events_in(tenant: Tenant, action: str) -> int:
    with tenant_scope(tenant.pk):
        return AuditEvent.objects.filter(action=action).count()


def issue(tenant: Tenant, name: str = "bot", actions: str | None = None) -> tuple[Any, str]:
    credential = AgentCredentialFactory(tenant=tenant, name=name, actions=actions)
    return credential, credential.token


# --- sign-in, home, layout ------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["dashboard", "credentials", "members", "audit", "audit-verify"])
def test_it_redirects_anonymous_people_to_the_login_page(client, tenant, name):
    response = client.get(url(name, tenant))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("console:login"))


def test_it_redirects_anonymous_people_from_home_to_the_login_page(client):
    response = client.get(reverse("console:home"))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("console:login"))


def test_it_shows_a_labelled_login_form(client):
    response = client.get(reverse("console:login"))
    html = response.content.decode()
    assert response.status_code == 200
    assert '<label for="id_username"' in html
    assert '<label for="id_password"' in html


def test_it_shows_an_error_for_a_wrong_password(client, owner):
    response = client.post(reverse("console:login"), {"username": "olivia", "password": "nope"})
    assert response.status_code == 200
    assert 'role="alert"' in response.content.decode()
    assert "correct username and password" in response.content.decode()


def test_it_signs_in_and_lands_on_the_only_tenant(client, owner, tenant):
    response = client.post(
        reverse("console:login"), {"username": "olivia", "password": "pw-olivia"}, follow=True
    )
    assert response.redirect_chain[-1][0] == url("dashboard", tenant)
    assert response.status_code == 200


def test_it_lists_the_tenants_of_a_person_in_several(client, owner, tenant, other_tenant):
    MembershipFactory(tenant=other_tenant, user=owner, role=Role.AUDITOR)
    response = signed_in(client, owner).get(reverse("console:home"))
    html = response.content.decode()
    assert response.status_code == 200
    assert url("dashboard", tenant) in html
    assert url("dashboard", other_tenant) in html


def test_it_explains_what_to_do_to_a_person_in_no_tenant(client, django_user_model):
    lonely = UserFactory(username="lonely")
    response = signed_in(client, lonely).get(reverse("console:home"))
    html = response.content.decode()
    assert response.status_code == 200
    assert "ask an admin" in html.lower()
    assert "memoryconsole create-tenant" in html


def test_it_offers_a_tenant_switcher_to_a_person_in_several(client, owner, tenant, other_tenant):
    MembershipFactory(tenant=other_tenant, user=owner, role=Role.AUDITOR)
    html = signed_in(client, owner).get(url("dashboard", tenant)).content.decode()
    switcher = html.split('aria-label="Tenants"', 1)[1].split("</nav>", 1)[0]
    assert url("dashboard", other_tenant) in switcher
    assert "Globex" in switcher


def test_it_signs_out_with_a_post_form(client, owner, tenant):
    html = signed_in(client, owner).get(url("dashboard", tenant)).content.decode()
    assert f'<form method="post" action="{reverse("console:logout")}"' in html
    response = client.post(reverse("console:logout"))
    assert response.status_code == 302
    assert client.get(url("dashboard", tenant)).status_code == 302


def test_it_serves_htmx_from_its_own_static_files(client, owner, tenant):
    html = signed_in(client, owner).get(url("dashboard", tenant)).content.decode()
    script = re.search(r'<script src="([^"]*htmx[^"]*)"', html)
    assert script
    assert script.group(1).startswith("/static/")
    assert "unpkg" not in html
    assert "cdn" not in html.lower()
    assert client.get(script.group(1)).status_code == 200
    assert client.get("/static/console/console.css").status_code == 200
    assert client.get("/static/console/favicon.svg").status_code == 200


def test_it_sends_the_csrf_token_with_htmx_requests(client, owner, tenant):
    html = signed_in(client, owner).get(url("dashboard", tenant)).content.decode()
    assert re.search(r"<body hx-headers='\{\"X-CSRFToken\": \"[^\"]+\"\}'>", html)


def test_it_has_landmarks_and_a_skip_link(client, owner, tenant):
    html = signed_in(client, owner).get(url("dashboard", tenant)).content.decode()
    assert 'href="#main"' in html
    assert '<main id="main"' in html
    assert "<header" in html
    assert "<nav" in html


def test_it_links_only_to_pages_that_exist(client, owner, tenant):
    html = signed_in(client, owner).get(url("dashboard", tenant)).content.decode()
    sidenav = html.split('class="sidenav"', 1)[1].split("</nav>", 1)[0]
    links = re.findall(r'href="([^"]+)"', sidenav)
    assert url("members", tenant) in links
    for link in links:
        assert client.get(link).status_code == 200, link


def test_it_hides_sections_the_persons_role_lacks(client, member, tenant):
    html = signed_in(client, member).get(url("dashboard", tenant)).content.decode()
    sidenav = html.split('class="sidenav"', 1)[1].split("</nav>", 1)[0]
    assert "Dashboard" in sidenav
    for hidden in ("Credentials", "Members", "Audit", "Review", "Conflicts"):
        assert hidden not in sidenav


# --- access --------------------------------------------------------------------------------------


@pytest.mark.parametrize("persona", ["owner", "reviewer", "member", "auditor"])
def test_it_shows_the_dashboard_to_every_role(client, tenant, persona, request):
    user = request.getfixturevalue(persona)
    response = signed_in(client, user).get(url("dashboard", tenant))
    assert response.status_code == 200


@pytest.mark.parametrize(
    ("persona", "name"),
    [
        ("owner", "credentials"),
        ("owner", "members"),
        ("owner", "audit"),
        ("auditor", "audit"),
        ("auditor", "audit-verify"),
    ],
)
def test_it_shows_each_page_to_the_roles_allowed(client, tenant, persona, name, request):
    user = request.getfixturevalue(persona)
    assert signed_in(client, user).get(url(name, tenant)).status_code == 200


@pytest.mark.parametrize(
    ("persona", "name"),
    [
        ("member", "credentials"),
        ("reviewer", "credentials"),
        ("auditor", "credentials"),
        ("member", "members"),
        ("auditor", "members"),
        ("member", "audit"),
        ("reviewer", "audit-verify"),
    ],
)
def test_it_forbids_pages_of_ones_own_tenant_that_the_role_lacks(
    client, tenant, persona, name, request
):
    user = request.getfixturevalue(persona)
    response = signed_in(client, user).get(url(name, tenant))
    assert response.status_code == 403


@pytest.mark.parametrize(
    "name",
    ["dashboard", "credentials", "members", "audit", "audit-verify", "credential-issue-form"],
)
def test_it_hides_another_tenants_pages_from_an_outsider(client, tenant, outsider, name):
    response = signed_in(client, outsider).get(url(name, tenant))
    assert response.status_code == 404


def test_it_gives_the_same_404_for_a_tenant_that_does_not_exist(client, outsider):
    response = signed_in(client, outsider).get("/console/t/no-such-tenant/")
    assert response.status_code == 404


def test_it_refuses_an_outsiders_changes_to_another_tenant(client, tenant, owner, outsider):
    credential, _ = issue(tenant)
    with tenant_scope(tenant.pk):
        membership = Membership.objects.get(user=owner)
    signed_in(client, outsider)
    revoke = url("credential-revoke", tenant, credential_id=credential.pk)
    assert client.post(revoke).status_code == 404
    role = url("member-role", tenant, membership_id=membership.pk)
    assert client.post(role, {"role": "member"}).status_code == 404
    assert (
        client.post(url("members", tenant), {"username": "oscar", "role": "admin"}).status_code
        == 404
    )
    assert credentials_of(tenant)[0].revoked_at is None
    assert memberships_in(tenant) == {"olivia": "admin"}


# --- dashboard -----------------------------------------------------------------------------------


def test_it_counts_members_credentials_and_recent_events(client, tenant, owner, member, auditor):
    issue(tenant, "one")
    revoked, _ = issue(tenant, "two")
    from apps.tenancy.services import credential_revoke

    credential_revoke(credential=revoked, actor=Actor.system("tests"), reason="retired")
    response = signed_in(client, owner).get(url("dashboard", tenant))
    figures = response.context["dashboard"]
    assert figures.members_total == 3
    assert {item.role: item.count for item in figures.members_by_role} == {
        "admin": 1,
        "reviewer": 0,
        "member": 1,
        "auditor": 1,
    }
    assert figures.active_credentials == 1
    with tenant_scope(tenant.pk):
        total_events = AuditEvent.objects.count()
        newest = list(AuditEvent.objects.order_by("-seq").values_list("seq", flat=True)[:10])
    assert figures.audit_events_recent == total_events
    assert [event.seq for event in figures.latest_events] == newest


def test_it_keeps_the_audit_log_off_the_dashboard_of_people_who_may_not_see_it(
    client, tenant, member
):
    response = signed_in(client, member).get(url("dashboard", tenant))
    assert response.context["dashboard"].latest_events is None
    assert "Latest activity" not in response.content.decode()


def test_it_reads_the_dashboard_in_a_fixed_number_of_queries(
    client, tenant, owner, django_user_model, django_assert_max_num_queries
):
    for index in range(15):
        person(tenant, f"person{index}", Role.MEMBER)
        issue(tenant, f"bot-{index}")
    signed_in(client, owner)
    with django_assert_max_num_queries(16):
        assert client.get(url("dashboard", tenant)).status_code == 200


# --- credentials ---------------------------------------------------------------------------------


def test_it_issues_a_credential_and_shows_its_token_once(client, tenant, owner):
    signed_in(client, owner)
    page = client.get(url("credentials", tenant)).content.decode()
    response = client.post(
        url("credentials", tenant),
        {"name": "checkout-agent", "actions": ["read", "write"], "nonce": nonce_of(page)},
    )
    html = response.content.decode()
    token = re.search(r'id="issued-token"[^>]*value="(mc_[^"]+)"', html).group(1)
    assert "will not be shown again" in html
    assert "no-store" in response["Cache-Control"]
    [credential] = credentials_of(tenant)
    assert credential.name == "checkout-agent"
    assert credential.actions == ["read", "write"]
    assert credential.created_by == owner
    assert token not in client.get(url("credentials", tenant)).content.decode()


def test_it_issues_a_token_that_authenticates_against_the_api(client, tenant, owner):
    signed_in(client, owner)
    page = client.get(url("credentials", tenant)).content.decode()
    html = client.post(
        url("credentials", tenant),
        {
            "name": "api-bot",
            "actions": ["read", "write", "search", "state"],
            "nonce": nonce_of(page),
        },
    ).content.decode()
    token = re.search(r'value="(mc_[^"]+)"', html).group(1)
    response = Client().get("/api/v1/me", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200
    assert response.json()["name"] == "api-bot"
    assert response.json()["tenant"] == "acme"


def test_it_preselects_the_default_actions(client, tenant, owner):
    html = signed_in(client, owner).get(url("credentials", tenant)).content.decode()
    checked = set(re.findall(r'name="actions" value="(\w+)"[^>]*checked', html))
    assert checked == {"read", "write", "search", "state"}


def test_its_issue_form_checks_sees_restricted_memories_by_default(client, tenant, owner):
    html = signed_in(client, owner).get(url("credentials", tenant)).content.decode()
    assert "Sees restricted memories" in html
    assert re.search(r'<input type="checkbox" name="sees_restricted"[^>]*checked', html)


@pytest.mark.parametrize("sees", [True, False])
def test_it_issues_a_credential_with_or_without_restricted_sight(client, tenant, owner, sees):
    signed_in(client, owner)
    page = client.get(url("credentials", tenant)).content.decode()
    data = {"name": "bot", "actions": ["read"], "nonce": nonce_of(page)}
    if sees:
        data["sees_restricted"] = "on"  # an unchecked checkbox is not sent at all
    html = client.post(url("credentials", tenant), data).content.decode()
    [credential] = credentials_of(tenant)
    assert credential.sees_restricted is sees
    with tenant_scope(tenant.pk):
        event = AuditEvent.objects.get(action="credential.issue")
    assert event.data == {"actions": ["read"], "sees_restricted": sees}
    said = "It sees restricted memories." if sees else "It does not see restricted memories."
    assert said in html
    listing = client.get(url("credentials", tenant)).content.decode()
    assert ("no restricted memories" in listing) is not sees


@pytest.mark.parametrize(
    "data",
    [
        {"name": "", "actions": ["read"]},
        {"name": "   ", "actions": ["read"]},
        {"name": "bot", "actions": []},
        {"name": "bot", "actions": ["read", "fly"]},
    ],
)
def test_it_shows_a_form_error_and_issues_nothing_for_bad_input(client, tenant, owner, data):
    signed_in(client, owner)
    page = client.get(url("credentials", tenant)).content.decode()
    response = client.post(url("credentials", tenant), {**data, "nonce": nonce_of(page)})
    assert response.status_code == 200
    assert 'class="errorlist' in response.content.decode()
    assert credentials_of(tenant) == []


def test_it_issues_one_credential_for_a_form_submitted_twice(client, tenant, owner):
    signed_in(client, owner)
    page = client.get(url("credentials", tenant)).content.decode()
    data = {"name": "double-click", "actions": ["read"], "nonce": nonce_of(page)}
    first = client.post(url("credentials", tenant), data)
    second = client.post(url("credentials", tenant), data)
    assert "mc_" in first.content.decode()
    assert "already submitted" in second.content.decode()
    assert (
        "mc_"
        not in re.sub(r"<code>mc_[^<]*</code>", "", second.content.decode()).split(
            'id="credential-table"'
        )[0]
    )
    assert len(credentials_of(tenant)) == 1
    assert events_in(tenant, "credential.issue") == 1


def test_it_lets_a_fresh_form_issue_another_credential(client, tenant, owner):
    signed_in(client, owner)
    for name in ("first", "second"):
        page = client.get(url("credentials", tenant)).content.decode()
        client.post(
            url("credentials", tenant), {"name": name, "actions": ["read"], "nonce": nonce_of(page)}
        )
    assert [c.name for c in credentials_of(tenant)] == ["first", "second"]


def test_it_refuses_a_nonce_it_never_issued(client, tenant, owner):
    signed_in(client, owner)
    response = client.post(
        url("credentials", tenant), {"name": "forged", "actions": ["read"], "nonce": "made-up"}
    )
    assert "already submitted" in response.content.decode()
    assert credentials_of(tenant) == []


def test_it_answers_htmx_with_the_token_fragment_only(client, tenant, owner):
    signed_in(client, owner)
    page = client.get(url("credentials", tenant)).content.decode()
    response = client.post(
        url("credentials", tenant),
        {"name": "htmx-bot", "actions": ["read"], "nonce": nonce_of(page)},
        headers=HTMX,
    )
    html = response.content.decode()
    assert "<html" not in html
    assert 'id="issue-panel"' in html
    assert re.search(r'value="mc_[^"]+"', html)
    assert 'id="credential-table" hx-swap-oob="true"' in html
    assert 'id="messages"' in html


def test_it_answers_htmx_form_errors_with_the_form_fragment(client, tenant, owner):
    signed_in(client, owner)
    page = client.get(url("credentials", tenant)).content.decode()
    response = client.post(
        url("credentials", tenant),
        {"name": "", "actions": ["read"], "nonce": nonce_of(page)},
        headers=HTMX,
    )
    html = response.content.decode()
    assert "<html" not in html
    assert 'aria-invalid="true"' in html
    assert credentials_of(tenant) == []


def test_it_revokes_a_credential_so_its_token_gets_401(client, tenant, owner):
    credential, token = issue(tenant, "retiring")
    api = Client()
    assert api.get("/api/v1/me", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    response = signed_in(client, owner).post(
        url("credential-revoke", tenant, credential_id=credential.pk), {"reason": "retired"}
    )
    assert response.status_code == 302
    assert api.get("/api/v1/me", headers={"Authorization": f"Bearer {token}"}).status_code == 401
    [stored] = credentials_of(tenant)
    assert stored.revoked_at is not None
    assert stored.revoked_by == owner


def test_it_treats_revoking_twice_as_harmless(client, tenant, owner):
    credential, _ = issue(tenant)
    signed_in(client, owner)
    revoke = url("credential-revoke", tenant, credential_id=credential.pk)
    client.post(revoke, {"reason": "retired"})
    response = client.post(revoke, {"reason": "retired"}, follow=True)
    assert response.status_code == 200
    assert "already revoked" in response.content.decode()
    assert events_in(tenant, "credential.revoke") == 1


def test_it_asks_for_confirmation_before_revoking_without_javascript(client, tenant, owner):
    credential, _ = issue(tenant, "keep-me")
    response = signed_in(client, owner).get(
        url("credential-revoke", tenant, credential_id=credential.pk)
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert "Revoke “keep-me”?" in html
    assert '<form method="post"' in html
    assert credentials_of(tenant)[0].revoked_at is None


def test_it_updates_the_revoked_row_in_place_for_htmx(client, tenant, owner):
    credential, _ = issue(tenant, "row-bot")
    response = signed_in(client, owner).post(
        url("credential-revoke", tenant, credential_id=credential.pk),
        {"reason": "retired"},
        headers=HTMX,
    )
    html = response.content.decode()
    assert "<html" not in html
    assert html.lstrip().startswith(f'<tr id="credential-{credential.pk}"')
    assert "Revoked" in html
    assert 'hx-swap-oob="innerHTML"' in html


def test_it_404s_for_another_tenants_credential(client, tenant, other_tenant, owner):
    foreign, _ = issue(other_tenant, "theirs")
    response = signed_in(client, owner).post(
        url("credential-revoke", tenant, credential_id=foreign.pk)
    )
    assert response.status_code == 404
    assert credentials_of(other_tenant)[0].revoked_at is None


def test_it_lists_credentials_without_a_query_per_row(
    client, tenant, owner, django_assert_max_num_queries
):
    for index in range(25):
        issue(tenant, f"bot-{index}")
    signed_in(client, owner)
    with django_assert_max_num_queries(16):
        response = client.get(url("credentials", tenant))
    assert response.content.decode().count('<tr id="credential-') == 25


# --- members -------------------------------------------------------------------------------------


def test_it_lists_members_and_roles(client, tenant, owner, member, reviewer):
    html = signed_in(client, owner).get(url("members", tenant)).content.decode()
    for username in ("olivia", "mario", "rhea"):
        assert username in html
    assert '<option value="reviewer" selected>' in html


def test_it_lists_only_this_tenants_members_for_a_person_in_several(
    client, tenant, other_tenant, owner, outsider
):
    MembershipFactory(tenant=other_tenant, user=owner, role=Role.MEMBER)
    response = signed_in(client, owner).get(url("members", tenant))
    members = response.context["members"]
    assert [(m.user.username, m.tenant_id) for m in members] == [("olivia", tenant.pk)]


def test_it_adds_an_existing_person_with_a_role(client, tenant, owner, django_user_model):
    UserFactory(username="newbie")
    response = signed_in(client, owner).post(
        url("members", tenant), {"username": "newbie", "role": "reviewer"}
    )
    assert response.status_code == 302
    assert memberships_in(tenant)["newbie"] == "reviewer"
    newbie = django_user_model.objects.get(username="newbie")
    assert signed_in(Client(), newbie).get(url("dashboard", tenant)).status_code == 200


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ({"username": "ghost", "role": "member"}, "no active account"),
        ({"username": "olivia", "role": "member"}, "already a member"),
        ({"username": "newbie", "role": "overlord"}, "Select a valid choice"),
        ({"username": "", "role": "member"}, "This field is required"),
    ],
)
def test_it_refuses_a_bad_addition_with_a_form_error(
    client, tenant, owner, django_user_model, data, error
):
    UserFactory(username="newbie")
    response = signed_in(client, owner).post(url("members", tenant), data)
    assert response.status_code == 200
    assert error in response.content.decode()
    assert memberships_in(tenant) == {"olivia": "admin"}


def test_it_answers_an_htmx_addition_with_the_members_panel(
    client, tenant, owner, django_user_model
):
    UserFactory(username="newbie")
    response = signed_in(client, owner).post(
        url("members", tenant), {"username": "newbie", "role": "member"}, headers=HTMX
    )
    html = response.content.decode()
    assert "<html" not in html
    assert 'id="members-panel"' in html
    assert "newbie" in html


def test_it_changes_a_members_role(client, tenant, owner, member):
    with tenant_scope(tenant.pk):
        membership = Membership.objects.get(user=member)
    signed_in(client, owner).post(
        url("member-role", tenant, membership_id=membership.pk), {"role": "auditor"}
    )
    assert memberships_in(tenant)["mario"] == "auditor"
    assert signed_in(Client(), member).get(url("audit", tenant)).status_code == 200


def test_it_answers_an_htmx_role_change_with_the_row(client, tenant, owner, member):
    with tenant_scope(tenant.pk):
        membership = Membership.objects.get(user=member)
    response = signed_in(client, owner).post(
        url("member-role", tenant, membership_id=membership.pk), {"role": "reviewer"}, headers=HTMX
    )
    html = response.content.decode()
    assert "<html" not in html
    assert html.lstrip().startswith(f'<tr id="member-{membership.pk}"')
    assert '<option value="reviewer" selected>' in html


def test_it_refuses_to_demote_the_last_admin(client, tenant, owner):
    with tenant_scope(tenant.pk):
        membership = Membership.objects.get(user=owner)
    response = signed_in(client, owner).post(
        url("member-role", tenant, membership_id=membership.pk), {"role": "member"}
    )
    assert response.status_code == 200
    assert "at least one admin" in response.content.decode()
    assert memberships_in(tenant) == {"olivia": "admin"}


def test_it_refuses_to_remove_the_last_admin(client, tenant, owner, member):
    with tenant_scope(tenant.pk):
        membership = Membership.objects.get(user=owner)
    response = signed_in(client, owner).post(
        url("member-remove", tenant, membership_id=membership.pk)
    )
    assert response.status_code == 200
    assert "at least one admin" in response.content.decode()
    assert memberships_in(tenant) == {"olivia": "admin", "mario": "member"}
    assert events_in(tenant, "membership.remove") == 0


def test_it_shows_the_last_admin_refusal_in_the_row_for_htmx(client, tenant, owner):
    with tenant_scope(tenant.pk):
        membership = Membership.objects.get(user=owner)
    response = signed_in(client, owner).post(
        url("member-remove", tenant, membership_id=membership.pk), headers=HTMX
    )
    html = response.content.decode()
    assert "<html" not in html
    assert 'role="alert"' in html
    assert "at least one admin" in html


def test_it_removes_a_member(client, tenant, owner, member):
    with tenant_scope(tenant.pk):
        membership = Membership.objects.get(user=member)
    response = signed_in(client, owner).post(
        url("member-remove", tenant, membership_id=membership.pk)
    )
    assert response.status_code == 302
    assert memberships_in(tenant) == {"olivia": "admin"}
    assert signed_in(Client(), member).get(url("dashboard", tenant)).status_code == 404


def test_it_lets_an_admin_leave_when_another_admin_remains(
    client, tenant, owner, django_user_model
):
    person(tenant, "second", Role.ADMIN)
    with tenant_scope(tenant.pk):
        membership = Membership.objects.get(user=owner)
    response = signed_in(client, owner).post(
        url("member-remove", tenant, membership_id=membership.pk), headers=HTMX
    )
    assert response["HX-Redirect"] == reverse("console:home")
    assert memberships_in(tenant) == {"second": "admin"}


def test_it_sends_an_admin_who_demoted_themselves_to_the_dashboard(
    client, tenant, owner, django_user_model
):
    person(tenant, "second", Role.ADMIN)
    with tenant_scope(tenant.pk):
        membership = Membership.objects.get(user=owner)
    response = signed_in(client, owner).post(
        url("member-role", tenant, membership_id=membership.pk), {"role": "member"}
    )
    assert response["Location"] == url("dashboard", tenant)


def test_it_asks_for_confirmation_before_removing_without_javascript(client, tenant, owner, member):
    with tenant_scope(tenant.pk):
        membership = Membership.objects.get(user=member)
    response = signed_in(client, owner).get(
        url("member-remove", tenant, membership_id=membership.pk)
    )
    assert response.status_code == 200
    assert "Remove mario" in response.content.decode()
    assert "mario" in memberships_in(tenant)


def test_it_lists_members_without_a_query_per_row(
    client, tenant, owner, django_user_model, django_assert_max_num_queries
):
    for index in range(25):
        person(tenant, f"person{index:02}", Role.MEMBER)
    signed_in(client, owner)
    with django_assert_max_num_queries(16):
        response = client.get(url("members", tenant))
    assert response.content.decode().count('<tr id="member-') == 26


# --- Django admin ---------------------------------------------------------------------------------


@pytest.fixture
def operator(django_user_model: Any) -> Any:
    return django_user_model.objects.create_superuser("root", password="pw-root")


def test_it_hides_tenant_rows_in_the_admin_until_a_tenant_is_chosen(
    client, operator, tenant, owner
):
    response = signed_in(client, operator).get(reverse("admin:tenancy_membership_changelist"))
    assert response.status_code == 200
    assert response.context["cl"].result_count == 0
    assert "No working tenant" in response.content.decode()


def test_it_works_in_the_chosen_tenant_and_records_it(
    client, operator, tenant, other_tenant, owner
):
    signed_in(client, operator)
    response = client.post(
        reverse("admin:tenancy_tenant_changelist"),
        {"action": "work_in_tenant", "_selected_action": [str(tenant.pk)]},
    )
    assert response.status_code == 302
    assert events_in(tenant, "platform.admin_tenant") == 1
    assert events_in(other_tenant, "platform.admin_tenant") == 0
    page = client.get(reverse("admin:tenancy_membership_changelist"))
    assert page.context["cl"].result_count == 1
    assert "Working in tenant" in page.content.decode()
    events = client.get(reverse("admin:audit_auditevent_changelist"))
    assert events.status_code == 200
    assert events.context["cl"].result_count == events_count(tenant)


def events_count(tenant: Tenant) -> int:
    with tenant_scope(tenant.pk):
        return AuditEvent.objects.count()


def test_it_stops_working_in_a_tenant(client, operator, tenant, owner):
    signed_in(client, operator)
    client.post(
        reverse("admin:tenancy_tenant_changelist"),
        {"action": "work_in_tenant", "_selected_action": [str(tenant.pk)]},
    )
    client.post(reverse("admin:tenancy_tenant_leave"))
    page = client.get(reverse("admin:tenancy_membership_changelist"))
    assert page.context["cl"].result_count == 0


def test_it_keeps_audit_events_read_only_in_the_admin(client, operator, tenant):
    signed_in(client, operator)
    client.post(
        reverse("admin:tenancy_tenant_changelist"),
        {"action": "work_in_tenant", "_selected_action": [str(tenant.pk)]},
    )
    with tenant_scope(tenant.pk):
        event = AuditEvent.objects.order_by("seq").first()
    assert client.get(reverse("admin:audit_auditevent_add")).status_code == 403
    assert client.get(reverse("admin:audit_auditevent_delete", args=[event.pk])).status_code == 403
    change = client.post(reverse("admin:audit_auditevent_change", args=[event.pk]), {"action": "x"})
    assert change.status_code == 403
    with tenant_scope(tenant.pk):
        assert AuditEvent.objects.get(pk=event.pk).action == "tenant.create"


def test_it_creates_tenants_in_the_admin_through_the_service(client, operator):
    signed_in(client, operator)
    response = client.post(
        reverse("admin:tenancy_tenant_add"), {"slug": "initech", "name": "Initech"}
    )
    assert response.status_code == 302
    tenant = Tenant.objects.get(slug="initech")
    assert events_in(tenant, "tenant.create") == 1


def test_it_changes_roles_in_the_admin_through_the_service(client, operator, tenant, owner, member):
    signed_in(client, operator)
    client.post(
        reverse("admin:tenancy_tenant_changelist"),
        {"action": "work_in_tenant", "_selected_action": [str(tenant.pk)]},
    )
    with tenant_scope(tenant.pk):
        membership = Membership.objects.get(user=member)
        owner_membership = Membership.objects.get(user=owner)
    response = client.post(
        reverse("admin:tenancy_membership_change", args=[membership.pk]), {"role": "reviewer"}
    )
    assert response.status_code == 302
    assert memberships_in(tenant)["mario"] == "reviewer"
    refused = client.post(
        reverse("admin:tenancy_membership_change", args=[owner_membership.pk]), {"role": "member"}
    )
    assert refused.status_code == 200
    assert "at least one admin" in refused.content.decode()
    assert memberships_in(tenant)["olivia"] == "admin"


def test_it_shows_a_tenant_read_only_in_the_admin(client, operator, tenant):
    signed_in(client, operator)
    response = client.get(reverse("admin:tenancy_tenant_change", args=[tenant.pk]))
    assert response.status_code == 200
    assert 'name="slug"' not in response.content.decode()
    client.post(reverse("admin:tenancy_tenant_change", args=[tenant.pk]), {"name": "Renamed"})
    tenant.refresh_from_db()
    assert tenant.name == "Acme Corp"
