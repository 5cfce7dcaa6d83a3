"""Who sees restricted memories: people holding ``view_restricted`` (admins and reviewers by
role, members and auditors an admin grants it to) and agent credentials, every one unless it
was issued without (``sees_restricted``: ``create-token --no-restricted``, the console's
checkbox); the actions stay API.md's. To everyone else a restricted memory does not exist:
missing from lists, facts, searches and checks, and a 404 by id, like another tenant's."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from apps.audit.models import AuditEvent
from apps.tenancy.context import tenant_scope
from apps.tenancy.models import AgentCredential, Membership, Role
from tests.api.support import assert_problem
from tests.conftest import Agent, make_agent
from tests.derivations.support import SUMMARIES, summarise

from .support import FACTS, RECORDS, write_ok

pytestmark = pytest.mark.django_db

# API.md's "every action".
EVERY_ACTION = "read,write,search,delete,review,state,erase,audit"


def _memories(tenant: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    writer = make_agent(tenant, "write", name="writer")
    secret = write_ok(
        writer,
        subject="user:1",
        key="health.condition",
        value="asthma",
        content="user has asthma",
        sensitivity="restricted",
        source__ref="doc:secret",
    )
    plain = write_ok(
        writer,
        subject="user:1",
        key="shipping.carrier",
        value="carrier_a",
        content="ships with carrier_a",
        source__ref="doc:plain",
    )
    return secret, plain


def _console(client: Client, user: Any, name: str, tenant: Any, **kwargs: Any) -> Any:
    client.force_login(user)
    return client.get(reverse(f"console:{name}", kwargs={"tenant_slug": tenant.slug, **kwargs}))


def _token(tenant: Any, *args: str) -> Agent:
    """An agent holding a token from ``memoryconsole create-token`` (as a black-box client)."""
    out = io.StringIO()
    call_command("create_token", tenant.slug, *args, stdout=out)
    token = out.getvalue().strip()
    with tenant_scope(tenant.pk):
        credential = AgentCredential.objects.get(token_prefix=token[:10])
    return Agent(Client(), tenant, token, credential)


def _search_ids(agent: Agent, **extra: Any) -> set[str]:
    found = agent.post("/api/v1/search", {"query": "asthma", "min_similarity": 0, **extra})
    assert found.status_code == 200, found.content
    return {(hit["record"] or {}).get("id") for hit in found.json()["results"]}


def _reads_it(agent: Agent, secret: dict[str, Any], plain: dict[str, Any]) -> None:
    listed = {r["id"] for r in agent.get(RECORDS, {"subject": "user:1"}).json()["results"]}
    assert listed == {secret["id"], plain["id"]}
    assert agent.get(f"{RECORDS}/{secret['id']}").json()["value"] == "asthma"
    assert agent.get(f"{RECORDS}/{secret['id']}/history").status_code == 200
    facts = agent.get(FACTS, {"subject": "user:1"}).json()["results"]
    assert {fact["key"] for fact in facts} == {"health.condition", "shipping.carrier"}
    check = agent.post("/api/v1/facts/check", {"facts": [{"id": secret["id"]}]}).json()
    assert check["facts"][0]["found"] is True
    assert secret["id"] in _search_ids(agent, sensitivity_max="restricted")
    assert secret["id"] in _search_ids(agent)


def _never_reads_it(agent: Agent, secret: dict[str, Any], plain: dict[str, Any]) -> None:
    listed = {r["id"] for r in agent.get(RECORDS, {"subject": "user:1"}).json()["results"]}
    assert listed == {plain["id"]}
    assert_problem(agent.get(f"{RECORDS}/{secret['id']}"), 404)
    assert_problem(agent.get(f"{RECORDS}/{secret['id']}/history"), 404)
    facts = agent.get(FACTS, {"subject": "user:1"}).json()["results"]
    assert [fact["key"] for fact in facts] == ["shipping.carrier"]
    check = agent.post("/api/v1/facts/check", {"facts": [{"id": secret["id"]}]}).json()
    assert check["facts"][0]["found"] is False
    for extra in ({}, {"sensitivity_max": "restricted"}):
        found = agent.post("/api/v1/search", {"query": "asthma", "min_similarity": 0, **extra})
        assert secret["id"] not in {
            (hit["record"] or {}).get("id") for hit in found.json()["results"]
        }
        assert "asthma" not in str(found.json())


@pytest.mark.parametrize("actions", [(), ("--actions", EVERY_ACTION)], ids=["default", "every"])
def test_a_default_or_every_action_credential_reads_back_restricted_memories(tenant, actions):
    """API.md's credentials, as issued: with the default actions or every action, a client
    reads back the restricted memory it wrote, and one another credential wrote."""
    agent = _token(tenant, "--name", "client", *actions)
    assert agent.get("/api/v1/me").json()["sees_restricted"] is True
    own = write_ok(
        agent,
        subject="user:2",
        key="health.condition",
        value="asthma",
        content="user has asthma",
        sensitivity="restricted",
        source__ref="doc:own",
    )
    shown = agent.get(f"{RECORDS}/{own['id']}")
    assert shown.status_code == 200, shown.content
    assert shown.json()["sensitivity"] == "restricted"
    assert own["id"] in {
        r["id"] for r in agent.get(RECORDS, {"subject": "user:2"}).json()["results"]
    }
    facts = agent.get(FACTS, {"subject": "user:2"}).json()["results"]
    assert [fact["key"] for fact in facts] == ["health.condition"]
    assert own["id"] in _search_ids(agent, sensitivity_max="restricted", subject="user:2")
    # And one another credential of the tenant wrote.
    secret, plain = _memories(tenant)
    _reads_it(agent, secret, plain)


def test_a_credential_issued_with_no_restricted_never_reads_a_restricted_memory(tenant):
    secret, plain = _memories(tenant)
    agent = _token(tenant, "--name", "narrow", "--actions", EVERY_ACTION, "--no-restricted")
    assert agent.get("/api/v1/me").json()["sees_restricted"] is False
    _never_reads_it(agent, secret, plain)
    # Not even the restricted memory it writes itself.
    own = write_ok(agent, subject="user:3", sensitivity="restricted", source__ref="doc:own")
    assert_problem(agent.get(f"{RECORDS}/{own['id']}"), 404)


def test_a_credential_without_restricted_sight_gets_a_404_for_a_restricted_summary(tenant):
    secret, plain = _memories(tenant)
    writer = make_agent(tenant, "read,write", name="summariser")
    summary = summarise(writer, [secret["id"], plain["id"]])
    assert summary.status_code == 201, summary.content
    assert writer.get(f"{SUMMARIES}/{summary.json()['id']}").status_code == 200
    blind = make_agent(tenant, "read", name="blind", sees_restricted=False)
    assert_problem(blind.get(f"{SUMMARIES}/{summary.json()['id']}"), 404)


def test_a_default_credential_reads_them_and_one_issued_without_does_not(tenant):
    secret, plain = _memories(tenant)
    _reads_it(make_agent(tenant, "read,search", name="clinic"), secret, plain)
    blind = make_agent(tenant, "read,search", name="reader", sees_restricted=False)
    _never_reads_it(blind, secret, plain)


def test_a_review_credential_without_it_does_not_see_restricted_requests(tenant):
    secret, _ = _memories(tenant)
    reviewer_bot = make_agent(tenant, "review", name="review-bot", sees_restricted=False)
    asking = make_agent(tenant, "write", name="asker")
    asked = asking.post(
        f"{RECORDS}/{secret['id']}/promotion-requests", {"evidence": {}, "reason": "seen"}
    )
    assert asked.status_code == 201, asked.content
    assert reviewer_bot.get("/api/v1/promotion-requests").json()["results"] == []
    approve = f"/api/v1/promotion-requests/{asked.json()['id']}/approve"
    assert_problem(reviewer_bot.post(approve, {"reason": "ok"}), 404)
    # A review credential as issued by default sees and decides it.
    default_reviewer = make_agent(tenant, "review", name="default-review-bot")
    listed = default_reviewer.get("/api/v1/promotion-requests").json()["results"]
    assert [request["id"] for request in listed] == [asked.json()["id"]]


def test_a_member_does_not_see_restricted_memories_in_the_console(client, tenant, member):
    secret, plain = _memories(tenant)
    listing = _console(client, member, "memories", tenant).content.decode()
    assert plain["id"] in listing
    assert secret["id"] not in listing
    assert _console(client, member, "memory", tenant, record_id=secret["id"]).status_code == 404
    subject = _console(client, member, "memory-subject", tenant, subject="user:1").content.decode()
    assert "shipping.carrier" in subject
    assert "health.condition" not in subject
    searched = client.get(
        reverse("console:memories", kwargs={"tenant_slug": tenant.slug}), {"q": "asthma"}
    ).content.decode()
    assert secret["id"] not in searched


def test_reviewers_and_admins_see_them_by_role(client, tenant, reviewer, owner):
    secret, _ = _memories(tenant)
    for person in (reviewer, owner):
        page = _console(client, person, "memory", tenant, record_id=secret["id"])
        assert page.status_code == 200
        assert "asthma" in page.content.decode()


def test_an_admin_grants_restricted_memories_to_a_member_and_withdraws_them(
    client, tenant, owner, member
):
    secret, _ = _memories(tenant)
    with tenant_scope(tenant.pk):
        membership = Membership.objects.get(user=member)
    grant = reverse(
        "console:member-restricted",
        kwargs={"tenant_slug": tenant.slug, "membership_id": membership.pk},
    )
    client.force_login(owner)
    members_page = client.get(reverse("console:members", kwargs={"tenant_slug": tenant.slug}))
    assert grant in members_page.content.decode()
    assert client.post(grant, {"granted": "yes"}).status_code == 302
    other = Client()
    assert _console(other, member, "memory", tenant, record_id=secret["id"]).status_code == 200
    with tenant_scope(tenant.pk):
        assert AuditEvent.objects.filter(action="membership.restricted_grant").count() == 1
    client.post(grant, {"granted": "no"})
    assert _console(other, member, "memory", tenant, record_id=secret["id"]).status_code == 404
    with tenant_scope(tenant.pk):
        assert AuditEvent.objects.filter(action="membership.restricted_withdraw").count() == 1


def test_a_grant_ends_with_a_role_change_and_is_refused_where_the_role_has_it(
    client, tenant, owner, member, reviewer
):
    secret, _ = _memories(tenant)
    with tenant_scope(tenant.pk):
        granted = Membership.objects.get(user=member)
        by_role = Membership.objects.get(user=reviewer)
    client.force_login(owner)

    def path(name: str, membership: Membership) -> str:
        return reverse(
            f"console:{name}", kwargs={"tenant_slug": tenant.slug, "membership_id": membership.pk}
        )

    client.post(path("member-restricted", granted), {"granted": "yes"})
    client.post(path("member-role", granted), {"role": Role.AUDITOR})
    other = Client()
    assert _console(other, member, "memory", tenant, record_id=secret["id"]).status_code == 404
    refused = client.post(
        path("member-restricted", by_role), {"granted": "no"}, headers={"HX-Request": "true"}
    )
    assert "see restricted memories by their role" in refused.content.decode()
    bad = client.post(
        path("member-restricted", granted), {"granted": "maybe"}, headers={"HX-Request": "true"}
    )
    assert "Grant or withdraw" in bad.content.decode()
    with tenant_scope(tenant.pk):
        assert not Membership.objects.get(pk=granted.pk).sees_restricted
