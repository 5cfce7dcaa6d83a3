"""``POST /api/v1/erasures`` and the deletion receipts it leaves."""

from __future__ import annotations

import json

import pytest

from apps.audit.models import AuditEvent, DeletionReceipt
from apps.core.actors import Actor
from apps.derivations.models import Embedding, Summary
from apps.governance import erasure
from apps.governance.erasure import erasure_run
from apps.governance.services import legal_hold_place
from apps.records.models import Fact, MemoryRecord, Observation
from apps.records.services import scope_for
from apps.tenancy.context import tenant_scope
from tests.derivations.support import RECORDS, drain, summarise, write
from tests.factories import FactFactory, MemoryRecordFactory, bulk_save

pytestmark = pytest.mark.django_db

ERASURES = "/api/v1/erasures"
RECEIPTS = "/api/v1/deletion-receipts"
SECRET = "lives at 12 quince lane"


def test_it_erases_by_subject_with_a_receipt_per_fact(admin_agent, tenant):
    a = write(admin_agent, subject="user:1", key="home", value=SECRET, content=SECRET)
    write(admin_agent, subject="user:1", key="home", value="v2", source__ref="interaction:9")
    b = write(admin_agent, subject="user:1", key="phone", value="555")
    kept = write(admin_agent, subject="user:2", key="home", value="elsewhere")
    summary = summarise(admin_agent, [a["id"], kept["id"]]).json()
    drain()
    response = admin_agent.post(ERASURES, {"subject": "user:1", "reason": "GDPR art. 17"})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["totals"]["facts"] == 2
    assert body["totals"]["records"] == 3
    assert body["totals"]["summaries_invalidated"] == 1
    assert len(body["receipts"]) == 2
    assert SECRET not in json.dumps(body)
    for rid in (a["id"], b["id"]):
        assert admin_agent.get(f"{RECORDS}/{rid}").status_code == 404
    assert admin_agent.get(f"{RECORDS}/{kept['id']}").status_code == 200
    with tenant_scope(tenant.pk):
        assert not MemoryRecord.objects.filter(subject="user:1").exists()
        assert not Fact.objects.filter(subject="user:1").exists()
        assert not Observation.objects.filter(record__subject="user:1").exists()
        assert Embedding.objects.filter(record_id=kept["id"]).exists()
        assert not Summary.objects.get(pk=summary["id"]).valid
        assert DeletionReceipt.objects.filter(parent_id=body["id"]).count() == 2
        for event in AuditEvent.objects.all():
            assert SECRET not in json.dumps(event.data)
    listed = admin_agent.get(RECEIPTS, {"parent": body["id"]}).json()
    assert len(listed["results"]) == 2
    parent = admin_agent.get(f"{RECEIPTS}/{body['id']}").json()
    assert parent["kind"] == "erasure"
    assert parent["children"] == 2


def test_it_erases_by_consent_and_by_owner(admin_agent, tenant):
    write(
        admin_agent,
        subject="user:1",
        retention={"basis": "consent", "consent_ref": "c-1", "ttl": "P30D"},
    )
    write(admin_agent, subject="user:2", owner="service:crm")
    by_consent = admin_agent.post(ERASURES, {"consent_ref": "c-1", "reason": "revoked"}).json()
    assert by_consent["totals"]["records"] == 1
    by_owner = admin_agent.post(ERASURES, {"owner": "service:crm", "reason": "offboarded"}).json()
    assert by_owner["totals"]["records"] == 1
    with tenant_scope(tenant.pk):
        assert not MemoryRecord.objects.exists()


def test_it_skips_and_counts_held_records(admin_agent, tenant):
    write(admin_agent, subject="user:1", key="a")
    write(admin_agent, subject="user:1", key="b")
    with tenant_scope(tenant.pk):
        legal_hold_place(
            tenant=tenant,
            actor=Actor.system("tests"),
            reason="litigation",
            fact=Fact.objects.get(key="a"),
        )
    body = admin_agent.post(ERASURES, {"subject": "user:1", "reason": "x"}).json()
    assert body["totals"]["held_records"] == 1
    assert body["totals"]["records"] == 1
    with tenant_scope(tenant.pk):
        assert list(MemoryRecord.objects.values_list("key", flat=True)) == ["a"]


def test_it_refuses_an_erasure_without_exactly_one_selector(admin_agent):
    assert admin_agent.post(ERASURES, {"reason": "x"}).status_code == 400
    both = admin_agent.post(ERASURES, {"subject": "a", "owner": "b", "reason": "x"})
    assert both.status_code == 400
    assert admin_agent.post(ERASURES, {"subject": "a"}).status_code == 400


def test_it_needs_the_erase_and_audit_actions(agent):
    assert agent.post(ERASURES, {"subject": "a", "reason": "x"}).status_code == 403
    assert agent.get(RECEIPTS).status_code == 403


def test_another_tenants_erasure_touches_nothing(admin_agent, tenant, other_agent):
    record = write(admin_agent, subject="user:1")
    body = other_agent.post(ERASURES, {"subject": "user:1", "reason": "x"}).json()
    assert body["totals"]["records"] == 0
    assert admin_agent.get(f"{RECORDS}/{record['id']}").status_code == 200
    assert other_agent.get(f"{RECEIPTS}/{body['id']}").status_code == 200
    assert admin_agent.get(f"{RECEIPTS}/{body['id']}").status_code == 404


def _bulk_records(tenant, count: int, subject: str) -> None:
    """``count`` single-version facts of ``subject``, inserted directly (fast set-up)."""
    with tenant_scope(tenant.pk):
        scope = scope_for(tenant=tenant, domain="commerce")
    facts = bulk_save(
        [
            FactFactory.build(
                tenant=tenant, subject=subject, key=f"k{i}", scope=scope, last_version=1
            )
            for i in range(count)
        ]
    )
    bulk_save(
        [
            MemoryRecordFactory.build(
                tenant=tenant,
                fact=fact,
                value=i,
                content=f"{fact.key}: {i}",
                source_ref=f"interaction:{i}",
                writer_label="bulk",
                reason="bulk",
                retention_basis="contract",
            )
            for i, fact in enumerate(facts)
        ],
        batch_size=2000,
    )


def test_it_erases_many_records_in_batches(tenant, monkeypatch):
    """Five batches of 200 facts, each its own transaction, one progress report after each;
    speed is measured by benchmarks/derived_delete.py, not asserted here."""
    monkeypatch.setattr(erasure, "BATCH_FACTS", 200)
    _bulk_records(tenant, 1000, "user:bulk")
    reported: list[tuple[int, int]] = []
    with tenant_scope(tenant.pk):
        result = erasure_run(
            tenant=tenant,
            actor=Actor.system("tests"),
            selector="subject",
            value="user:bulk",
            reason="bulk erasure",
            progress=lambda done, total: reported.append((done, total)),
        )
        assert reported == [(n, 1000) for n in (200, 400, 600, 800, 1000)]
        assert result.totals["records"] == 1000
        assert DeletionReceipt.objects.filter(parent=result.receipt).count() == 1000
        assert not MemoryRecord.objects.exists()
