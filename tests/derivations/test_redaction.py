"""``POST /records/{id}/redact``: named parts become a marker; derived artifacts follow."""

from __future__ import annotations

import json

import pytest

from apps.api.models import IdempotencyKey
from apps.audit.models import AuditEvent
from apps.derivations.models import Embedding, Summary
from apps.records.models import MemoryRecord
from apps.tenancy.context import tenant_scope
from apps.work.models import OutboxMessage

from .support import RECORDS, SEARCH, drain, summarise, write

pytestmark = pytest.mark.django_db

CARD = "4111111111111111"


def card_record(agent, **extra):
    return write(
        agent,
        key="payment.card",
        value={"card": {"number": CARD, "brand": "visa"}},
        content=f"pays with visa card {CARD}",
        **extra,
    )


def test_it_rewrites_the_named_field_in_value_and_content(admin_agent, tenant):
    record = card_record(admin_agent)
    summary = summarise(admin_agent, [record["id"]], text=f"card {CARD}").json()
    drain()
    response = admin_agent.post(
        f"{RECORDS}/{record['id']}/redact", {"fields": ["card.number"], "reason": "PCI"}
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert CARD not in json.dumps(body)
    assert body["value"] == {"card": {"number": "[REDACTED]", "brand": "visa"}}
    assert body["redaction"]["state"] == "applied"
    assert body["redaction"]["fields"] == ["card.number"]
    assert body["redaction_result"]["counts"]["summaries_invalidated"] == 1
    with tenant_scope(tenant.pk):
        stored = MemoryRecord.objects.get(pk=record["id"])
        assert CARD not in stored.content
        assert "[REDACTED]" in stored.content
        assert not Embedding.objects.filter(record_id=record["id"]).exists()
        assert OutboxMessage.objects.filter(object_id=record["id"], state="pending").exists()
        invalid = Summary.objects.get(pk=summary["id"])
        assert not invalid.valid
        event = AuditEvent.objects.get(action="record.redact")
        assert invalid.invalidated_by == event.pk
        assert event.data["fields"] == ["card.number"]
        assert CARD not in json.dumps(event.data)
    drain()  # re-embedded from the redacted text
    with tenant_scope(tenant.pk):
        assert Embedding.objects.filter(record_id=record["id"]).count() == 1
    detail = admin_agent.get(f"{RECORDS}/{record['id']}").json()
    assert CARD not in json.dumps(detail)
    found = admin_agent.post(SEARCH, {"query": CARD, "scope": {"domain": "commerce"}}).json()
    assert all(r["record"]["id"] != record["id"] for r in found["results"]) or CARD not in (
        json.dumps(found)
    )


def test_it_redacts_a_scalar_value(admin_agent):
    record = write(admin_agent, value="hunter2-secret", content="password is hunter2-secret")
    response = admin_agent.post(f"{RECORDS}/{record['id']}/redact", {"fields": [""], "reason": "x"})
    assert response.status_code == 200, response.content
    assert response.json()["value"] == "[REDACTED]"
    assert "hunter2" not in json.dumps(response.json())


def test_it_names_unknown_paths_and_changes_nothing(admin_agent, tenant):
    record = card_record(admin_agent)
    response = admin_agent.post(
        f"{RECORDS}/{record['id']}/redact",
        {"fields": ["card.number", "card.cvv"], "reason": "PCI"},
    )
    assert response.status_code == 422  # valid by itself; the record's value has no card.cvv
    assert list(response.json()["errors"]) == ["fields[1]"]
    assert "card.cvv" in response.json()["errors"]["fields[1]"][0]
    with tenant_scope(tenant.pk):
        assert MemoryRecord.objects.get(pk=record["id"]).value["card"]["number"] == CARD


def test_it_forgets_stored_responses_showing_the_old_value(admin_agent, tenant):
    from tests.records.factories import body

    keyed = admin_agent.post(
        RECORDS,
        body(key="payment.card", value={"card": {"number": CARD}}),
        headers={"Idempotency-Key": "w-1"},
    )
    assert keyed.status_code == 201
    admin_agent.post(
        f"{RECORDS}/{keyed.json()['id']}/redact", {"fields": ["card.number"], "reason": "PCI"}
    )
    with tenant_scope(tenant.pk):
        for stored in IdempotencyKey.objects.all():
            assert CARD not in json.dumps(stored.response_body)


def test_another_tenant_cannot_redact(admin_agent, tenant, other_agent):
    record = card_record(admin_agent)
    response = other_agent.post(
        f"{RECORDS}/{record['id']}/redact", {"fields": ["card.number"], "reason": "x"}
    )
    assert response.status_code == 404
    with tenant_scope(tenant.pk):
        assert MemoryRecord.objects.get(pk=record["id"]).redaction_state == "none"


def test_it_needs_the_delete_action(agent):
    record = card_record(agent)
    response = agent.post(f"{RECORDS}/{record['id']}/redact", {"fields": ["card"], "reason": "x"})
    assert response.status_code == 403
