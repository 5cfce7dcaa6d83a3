"""``memoryconsole create-tenant`` and ``memoryconsole create-token``."""

from __future__ import annotations

import io
import re

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from apps.audit.models import AuditEvent
from apps.audit.services import GENESIS
from apps.tenancy.context import tenant_scope
from apps.tenancy.models import AgentCredential, Tenant, hash_token
from memoryconsole.cli import prepare_environment

pytestmark = pytest.mark.django_db


def run(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def _credentials(tenant: Tenant) -> list[AgentCredential]:
    with tenant_scope(tenant.pk):
        return list(AgentCredential.objects.order_by("created_at"))


# --- create-tenant --------------------------------------------------------------------------------


def test_create_tenant_creates_it_and_says_so():
    out, _ = run("create_tenant", "acme", "--name", "Acme Corp")
    tenant = Tenant.objects.get(slug="acme")
    assert tenant.name == "Acme Corp"
    assert out == f"created tenant acme ({tenant.pk})\n"


def test_create_tenant_defaults_the_name_to_the_slug():
    run("create_tenant", "globex")
    assert Tenant.objects.get(slug="globex").name == "globex"


def test_create_tenant_opens_the_audit_chain():
    run("create_tenant", "acme")
    tenant = Tenant.objects.get(slug="acme")
    with tenant_scope(tenant.pk):
        events = list(AuditEvent.objects.order_by("seq"))
    assert [(e.action, e.prev_hash) for e in events] == [("tenant.create", GENESIS)]


def test_create_tenant_refuses_a_taken_slug(tenant):
    with pytest.raises(CommandError, match="slug"):
        run("create_tenant", tenant.slug)
    assert Tenant.objects.filter(slug=tenant.slug).count() == 1


@pytest.mark.parametrize("slug", ["Not A Slug", "a/b", "x" * 64])
def test_create_tenant_refuses_an_invalid_slug(slug):
    before = Tenant.objects.count()
    with pytest.raises(CommandError, match="slug"):
        run("create_tenant", slug)
    assert Tenant.objects.count() == before


# --- create-token --------------------------------------------------------------------------------


def test_create_token_prints_only_the_token(tenant):
    out, err = run("create_token", tenant.slug, "--name", "ci-bot")
    assert err == ""
    assert out.endswith("\n")
    lines = out.splitlines()
    assert len(lines) == 1
    token = lines[0]
    assert token.startswith("mc_")
    assert re.fullmatch(r"mc_[A-Za-z0-9_-]{40,}", token)


def test_create_token_issues_a_working_credential(tenant):
    out, _ = run("create_token", tenant.slug, "--name", "ci-bot")
    token = out.strip()
    response = Client().get("/api/v1/me", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200
    assert response.json()["tenant"] == tenant.slug
    assert response.json()["name"] == "ci-bot"


def test_create_token_defaults_to_read_write_search_state(tenant):
    run("create_token", tenant.slug, "--name", "default-bot")
    credential = _credentials(tenant)[-1]
    assert credential.actions == ["read", "write", "search", "state"]


def test_create_token_takes_a_list_of_actions(tenant):
    run("create_token", tenant.slug, "--name", "auditor", "--actions", "audit, read,audit")
    assert _credentials(tenant)[-1].actions == ["read", "audit"]


def test_create_token_stores_only_a_hash(tenant):
    out, _ = run("create_token", tenant.slug, "--name", "hashed")
    token = out.strip()
    credential = _credentials(tenant)[-1]
    assert credential.token_hash == hash_token(token)
    assert token not in {credential.token_hash, credential.token_prefix, credential.name}
    assert token.startswith(credential.token_prefix)


def test_create_token_records_the_issue_in_the_audit_log(tenant):
    run("create_token", tenant.slug, "--name", "logged", "--actions", "read")
    credential = _credentials(tenant)[-1]
    with tenant_scope(tenant.pk):
        event = AuditEvent.objects.get(action="credential.issue", object_id=str(credential.pk))
    assert event.data == {"actions": ["read"], "sees_restricted": True}
    assert event.actor_label == "create-token"


def test_create_token_issues_a_credential_that_sees_restricted_memories_by_default(tenant):
    run("create_token", tenant.slug, "--name", "default-bot")
    assert _credentials(tenant)[-1].sees_restricted is True


def test_create_token_no_restricted_issues_one_that_does_not(tenant):
    out, _ = run("create_token", tenant.slug, "--name", "narrow", "--no-restricted")
    credential = _credentials(tenant)[-1]
    assert credential.sees_restricted is False
    assert credential.actions == ["read", "write", "search", "state"]
    with tenant_scope(tenant.pk):
        event = AuditEvent.objects.get(action="credential.issue", object_id=str(credential.pk))
    assert event.data == {"actions": ["read", "write", "search", "state"], "sees_restricted": False}
    me = Client().get("/api/v1/me", headers={"Authorization": f"Bearer {out.strip()}"}).json()
    assert me["sees_restricted"] is False


def test_create_token_has_no_restricted_action(tenant):
    # The action set is API.md's, exactly: restricted sight is not an action.
    with pytest.raises(CommandError):
        run("create_token", tenant.slug, "--name", "x", "--actions", "read,restricted")
    assert _credentials(tenant) == []


def test_create_token_names_the_bad_actions(tenant):
    with pytest.raises(CommandError) as excinfo:
        run("create_token", tenant.slug, "--name", "x", "--actions", "read,fly,teleport")
    message = str(excinfo.value)
    assert "fly" in message
    assert "teleport" in message
    assert "read" in message.split("choose from", 1)[1]  # and says what is allowed
    assert _credentials(tenant) == []


@pytest.mark.parametrize("actions", ["", ",", " , "])
def test_create_token_needs_at_least_one_action(tenant, actions):
    with pytest.raises(CommandError, match="action"):
        run("create_token", tenant.slug, "--name", "x", "--actions", actions)


def test_create_token_refuses_an_unknown_tenant(db):
    with pytest.raises(CommandError, match=r"no tenant 'nowhere'.*create-tenant"):
        run("create_token", "nowhere", "--name", "x")


def test_create_token_needs_a_name(tenant):
    with pytest.raises(CommandError, match="name"):
        run("create_token", tenant.slug)
    with pytest.raises(CommandError, match="name"):
        run("create_token", tenant.slug, "--name", "   ")
    assert _credentials(tenant) == []


def test_create_token_issues_a_new_token_each_time(tenant):
    first, _ = run("create_token", tenant.slug, "--name", "a")
    second, _ = run("create_token", tenant.slug, "--name", "a")
    assert first != second
    assert len(_credentials(tenant)) == 2


def test_the_cli_spells_the_commands_with_hyphens():
    assert prepare_environment(["memoryconsole", "create-token", "acme"])[1] == "create_token"
    assert prepare_environment(["memoryconsole", "create-tenant", "acme"])[1] == "create_tenant"
