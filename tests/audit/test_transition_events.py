"""Every state transition's audit event says why (``data.reason``) and on what
(``data.target``: the record, the held or erased subject, the credential), never the
content it removed."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.urls import reverse

from apps.audit.models import AuditEvent
from apps.core.actors import Actor
from apps.governance.erasure_jobs import erasure_job_enqueue
from apps.governance.services import legal_hold_place
from apps.records.models import LegalHold
from apps.tenancy.context import tenant_scope
from apps.tenancy.models import AgentCredential
from tests.conftest import make_agent
from tests.records.factories import body

pytestmark = pytest.mark.django_db

RECORDS = "/api/v1/records"
SECRET = "lives at 12 quince lane"
HTMX = {"HX-Request": "true"}


@pytest.fixture
def admin_agent(tenant):
    return make_agent(tenant, "read,write,search,delete,review,state,erase,audit", "admin-bot")


def _write(agent, **overrides):
    response = agent.post(RECORDS, body(**overrides))
    assert response.status_code == 201, response.content[:500]
    return response.json()


def _event(tenant, action: str) -> AuditEvent:
    with tenant_scope(tenant.pk):
        [event] = AuditEvent.objects.filter(action=action)
    return event


def _events(tenant, action: str) -> list[AuditEvent]:
    with tenant_scope(tenant.pk):
        return list(AuditEvent.objects.filter(action=action).order_by("seq"))


def _no_content(event: AuditEvent) -> None:
    assert SECRET not in json.dumps(event.data)
    assert SECRET not in event.digest


def _console(name: str, tenant, **kwargs: Any) -> str:
    return reverse(f"console:{name}", kwargs={"tenant_slug": tenant.slug, **kwargs})


def test_a_redaction_names_its_reason_and_record(admin_agent, tenant):
    record = _write(admin_agent, value={"address": SECRET}, content=f"address {SECRET}")
    response = admin_agent.post(
        f"{RECORDS}/{record['id']}/redact",
        {"fields": ["value.address"], "reason": "customer asked"},
    )
    assert response.status_code == 200, response.content
    event = _event(tenant, "record.redact")
    assert event.data["reason"] == "customer asked"
    assert event.data["target"]["record"] == record["id"]
    assert event.data["target"]["subject"] == "user:8812"
    _no_content(event)


def _promotion(admin_agent, tenant):
    first = _write(admin_agent, source__ref="interaction:1")
    witness = make_agent(tenant, name="witness")
    request_id = _write(witness, source__ref="interaction:2")["promotion_request"]
    return first, request_id


@pytest.mark.parametrize("decision", ["approve", "reject"])
def test_a_promotion_decision_names_its_reason_and_record(admin_agent, tenant, decision):
    first, request_id = _promotion(admin_agent, tenant)
    reviewer = make_agent(tenant, "read,review", name="reviewer")
    response = reviewer.post(
        f"/api/v1/promotion-requests/{request_id}/{decision}", {"reason": "phoned the customer"}
    )
    assert response.status_code == 200, response.content
    event = _event(tenant, f"promotion.{decision}")
    assert event.data["reason"] == "phoned the customer"
    assert event.data["target"]["record"] == first["id"]
    assert event.data["target"]["subject"] == "user:8812"
    assert event.data["target"]["key"] == "shipping.preference"


def test_a_conflict_resolution_names_its_reason_and_versions(admin_agent, tenant):
    first = _write(admin_agent, source__ref="interaction:1")
    second = _write(admin_agent, value=SECRET, source__ref="interaction:2")
    reviewer = make_agent(tenant, "read,review", name="reviewer")
    response = reviewer.post(
        f"/api/v1/conflicts/{second['conflict']}/resolve",
        {"resolution": "keep_current", "reason": "the newer one was a typo"},
    )
    assert response.status_code == 200, response.content
    event = _event(tenant, "conflict.resolve")
    assert event.data["reason"] == "the newer one was a typo"
    assert event.data["target"]["current"] == first["id"]
    assert event.data["target"]["contender"] == second["id"]
    assert event.data["target"]["subject"] == "user:8812"
    _no_content(event)


def test_a_deletion_and_a_consent_revocation_name_their_reason_and_target(admin_agent, tenant):
    record = _write(admin_agent, value=SECRET)
    assert admin_agent.delete(f"{RECORDS}/{record['id']}?reason=asked").status_code == 200
    deleted = _event(tenant, "record.delete")
    assert deleted.data["reason"] == "asked"
    assert deleted.data["target"]["subject"] == "user:8812"
    _no_content(deleted)
    _write(admin_agent, retention={"basis": "consent", "consent_ref": "consent:77"})
    revoked = admin_agent.post("/api/v1/consents/consent:77/revoke", {"reason": "withdrawn"})
    assert revoked.status_code == 200, revoked.content
    event = _event(tenant, "consent.revoke")
    assert event.data["reason"] == "withdrawn"
    assert event.data["target"] == {"consent_ref": "consent:77"}


@pytest.mark.parametrize(("selector", "value"), [("subject", "user:1"), ("owner", "user:bob")])
def test_an_erasure_names_its_reason_and_the_erased_subject_or_owner(
    admin_agent, tenant, selector, value
):
    _write(admin_agent, subject="user:1", owner="user:bob", value=SECRET)
    response = admin_agent.post("/api/v1/erasures", {selector: value, "reason": "GDPR art. 17"})
    assert response.status_code == 200, response.content
    for action in ("erasure.batch", "erasure.complete"):
        event = _event(tenant, action)
        assert event.data["reason"] == "GDPR art. 17"
        assert event.data["target"] == {selector: value}
        _no_content(event)


def test_a_queued_erasure_names_its_reason_and_target(tenant):
    with tenant_scope(tenant.pk):
        erasure_job_enqueue(
            tenant=tenant,
            actor=Actor.system("tests"),
            selector="subject",
            value="user:1",
            reason="GDPR art. 17",
            records=3,
        )
    event = _event(tenant, "erasure.request")
    assert (event.data["reason"], event.data["target"]) == ("GDPR art. 17", {"subject": "user:1"})


def _hold(tenant, subject="user:1") -> LegalHold:
    with tenant_scope(tenant.pk):
        return legal_hold_place(
            tenant=tenant, actor=Actor.system("legal"), reason="litigation 42", subject=subject
        )


def test_placing_a_hold_names_its_reason_and_subject(tenant):
    _hold(tenant)
    event = _event(tenant, "legal_hold.place")
    assert event.data["reason"] == "litigation 42"
    assert event.data["target"] == {"subject": "user:1", "fact": None}


@pytest.mark.parametrize("headers", [{}, HTMX])
def test_lifting_a_hold_in_the_console_asks_for_a_reason(client, tenant, owner, headers):
    hold = _hold(tenant)
    client.force_login(owner)
    lift = _console("hold-lift", tenant, hold_id=hold.pk)
    assert 'name="reason"' in client.get(lift).content.decode()
    refused = client.post(lift, {"reason": "  "}, headers=headers)
    assert refused.status_code == 400
    html = refused.content.decode()
    assert "Say why you lift the hold" in html
    assert 'aria-invalid="true"' in html
    with tenant_scope(tenant.pk):
        assert LegalHold.objects.get(pk=hold.pk).lifted_at is None
    assert _events(tenant, "legal_hold.lift") == []
    lifted = client.post(lift, {"reason": "case settled"}, headers=headers)
    assert lifted.status_code in (200, 302)
    event = _event(tenant, "legal_hold.lift")
    assert event.data["reason"] == "case settled"
    assert event.data["target"] == {"subject": "user:1", "fact": None}
    assert (event.actor_type, event.actor_id) == ("user", str(owner.pk))


@pytest.mark.parametrize("headers", [{}, HTMX])
def test_revoking_a_credential_in_the_console_asks_for_a_reason(client, tenant, owner, headers):
    agent = make_agent(tenant, name="retiring")
    client.force_login(owner)
    revoke = _console("credential-revoke", tenant, credential_id=agent.credential.pk)
    assert 'name="reason"' in client.get(revoke).content.decode()
    refused = client.post(revoke, {"reason": ""}, headers=headers)
    assert refused.status_code == 400
    html = refused.content.decode()
    assert "Say why you revoke it" in html
    assert 'aria-invalid="true"' in html
    assert agent.get("/api/v1/me").status_code == 200
    assert _events(tenant, "credential.revoke") == []
    revoked = client.post(revoke, {"reason": "token leaked in a log"}, headers=headers)
    assert revoked.status_code in (200, 302)
    assert agent.get("/api/v1/me").status_code == 401
    event = _event(tenant, "credential.revoke")
    assert event.data["reason"] == "token leaked in a log"
    assert event.data["target"] == {"credential": str(agent.credential.pk), "name": "retiring"}
    with tenant_scope(tenant.pk):
        assert AgentCredential.objects.get(pk=agent.credential.pk).revoked_at is not None
