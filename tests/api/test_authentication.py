"""Bearer authentication: the credential alone names the tenant."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone
from psycopg import sql

from apps.core.actors import Actor
from apps.tenancy.context import tenant_scope
from apps.tenancy.models import AgentCredential, hash_token
from apps.tenancy.services import credential_revoke
from tests.conftest import make_agent

from .support import assert_problem

pytestmark = pytest.mark.django_db


def _last_used(credential: AgentCredential):
    with tenant_scope(credential.tenant_id):
        return AgentCredential.objects.get(pk=credential.pk).last_used_at


def _set_last_used(credential: AgentCredential, moment) -> None:
    with tenant_scope(credential.tenant_id):
        AgentCredential.objects.filter(pk=credential.pk).update(last_used_at=moment)


def test_it_identifies_the_credential_and_its_tenant(agent, tenant):
    response = agent.get("/api/v1/me")
    assert response.status_code == 200
    body = response.json()
    assert body["id"] == str(agent.credential.pk)
    assert body["tenant"] == tenant.slug
    assert body["actions"] == ["read", "write", "search", "state"]
    # Restricted memories are no action: a credential sees them unless issued without.
    assert body["sees_restricted"] is True


def test_it_takes_the_tenant_from_the_credential_not_the_request(
    tenant, other_tenant, auditing_agent
):
    # A tenant named in the query is an unknown parameter: refused, never honoured.
    refused = auditing_agent.get(
        "/api/v1/audit-events", {"tenant": other_tenant.slug, "tenant_id": str(other_tenant.pk)}
    )
    assert refused.status_code == 400
    assert set(refused.json()["errors"]) == {"tenant", "tenant_id"}
    response = auditing_agent.get(
        "/api/v1/audit-events",
        headers={"X-Tenant": other_tenant.slug, "X-Tenant-Id": str(other_tenant.pk)},
    )
    assert response.status_code == 200
    events = response.json()["results"]
    assert events
    with tenant_scope(tenant.pk):
        from apps.audit.models import AuditEvent

        own = {str(pk) for pk in AuditEvent.objects.values_list("pk", flat=True)}
    assert {event["id"] for event in events} == own


def test_it_records_when_a_credential_was_last_used(agent):
    assert _last_used(agent.credential) is None
    before = timezone.now()
    assert agent.get("/api/v1/me").status_code == 200
    used = _last_used(agent.credential)
    assert used is not None
    assert used >= before


def test_it_writes_last_used_at_most_once_a_minute(agent):
    recent = timezone.now() - timedelta(seconds=30)
    _set_last_used(agent.credential, recent)
    assert agent.get("/api/v1/me").status_code == 200
    assert _last_used(agent.credential) == recent


def test_it_writes_last_used_again_after_a_minute(agent):
    stale = timezone.now() - timedelta(minutes=2)
    _set_last_used(agent.credential, stale)
    assert agent.get("/api/v1/me").status_code == 200
    assert _last_used(agent.credential) > stale


def test_it_refuses_a_revoked_credential_like_an_unknown_one(tenant):
    agent = make_agent(tenant)
    assert agent.get("/api/v1/me").status_code == 200
    credential_revoke(credential=agent.credential, actor=Actor.system("tests"), reason="retired")
    revoked = assert_problem(agent.get("/api/v1/me"), 401)
    unknown = assert_problem(
        agent.client.get("/api/v1/me", headers={"Authorization": "Bearer mc_never-issued"}), 401
    )
    assert revoked == unknown


def test_it_looks_the_credential_up_in_two_statements_where_the_server_binds(tenant, monkeypatch):
    """With server-side binding (a database option) a query string holds one statement: the
    setting and the lookup go apart, with the same outcome, revocation included."""
    agent = make_agent(tenant)
    options = {**connection.settings_dict["OPTIONS"], "server_side_binding": True}
    monkeypatch.setitem(connection.settings_dict, "OPTIONS", options)
    assert agent.get("/api/v1/me").json()["id"] == str(agent.credential.pk)
    credential_revoke(credential=agent.credential, actor=Actor.system("tests"), reason="retired")
    assert_problem(agent.get("/api/v1/me"), 401)


def test_it_refuses_a_token_with_a_changed_character(agent):
    tampered = agent.token[:-1] + ("A" if agent.token[-1] != "A" else "B")
    response = agent.client.get("/api/v1/me", headers={"Authorization": f"Bearer {tampered}"})
    assert_problem(response, 401)


def test_it_accepts_the_scheme_in_any_case(agent):
    response = agent.client.get("/api/v1/me", headers={"Authorization": f"bearer {agent.token}"})
    assert response.status_code == 200


def test_it_hides_another_tenants_audit_event_like_a_missing_one(
    tenant, other_tenant, auditing_agent
):
    from apps.audit.models import AuditEvent

    with tenant_scope(other_tenant.pk):
        foreign = AuditEvent.objects.order_by("seq").first()
    assert foreign is not None
    missing = assert_problem(
        auditing_agent.get("/api/v1/audit-events/00000000-0000-4000-8000-000000000000"), 404
    )
    hidden = assert_problem(auditing_agent.get(f"/api/v1/audit-events/{foreign.pk}"), 404)
    assert hidden == missing
    listed = auditing_agent.get("/api/v1/audit-events", {"record": foreign.object_id}).json()
    assert listed["results"] == []


@pytest.mark.django_db(transaction=True)
def test_it_stores_tokens_only_as_hashes(tenant, owner_connection):
    agent = make_agent(tenant, "read,audit", name="hash-check")
    assert agent.get("/api/v1/me").status_code == 200  # used once: every write path has run
    secret = agent.token.removeprefix("mc_")
    tables = [
        row[0]
        for row in owner_connection.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename"
        )
    ]
    # Let the owner see the tenant's rows, whatever row-level security it is subject to.
    owner_connection.execute(
        "SELECT set_config('memoryconsole.tenant_id', %s, false)", [str(tenant.pk)]
    )
    found_hash = False
    for table in tables:
        rows = owner_connection.execute(
            sql.SQL("SELECT row_to_json(t)::text FROM {} t").format(sql.Identifier(table))
        ).fetchall()
        for (text,) in rows:
            assert secret not in text, f"plaintext token in {table}"
            found_hash = found_hash or hash_token(agent.token) in text
    assert found_hash, "the scan did not see the credential's row"
