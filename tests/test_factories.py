"""The model factories make rows the product reads as its own: under their tenant's
row-level security, consistent with one another, and out of every other tenant's sight."""

from __future__ import annotations

import pytest

from apps.audit.models import AuditEvent
from apps.audit.selectors import audit_chain_verify
from apps.derivations.models import Embedding, SummarySource
from apps.records.models import Fact, MemoryRecord, Scope
from apps.tenancy.context import tenant_scope
from apps.work.models import OutboxMessage
from tests import factories as f

TENANT_ROWS = [
    f.ScopeFactory,
    f.FactFactory,
    f.MemoryRecordFactory,
    f.ObservationFactory,
    f.PromotionRequestFactory,
    f.ConflictFactory,
    f.LegalHoldFactory,
    f.RetentionRuleFactory,
    f.ConsentRevocationFactory,
    f.ReviewClaimFactory,
    f.ReviewReasonFactory,
    f.SummaryFactory,
    f.SummarySourceFactory,
    f.EmbeddingFactory,
    f.OutboxMessageFactory,
    f.ErasureJobFactory,
    f.DeletionReceiptFactory,
    f.AuditEventFactory,
    f.RunFactory,
    f.EpisodeFactory,
    f.CheckpointFactory,
    f.ObligationFactory,
    f.EvaluationRunFactory,
    f.IdempotencyKeyFactory,
    f.MembershipFactory,
    f.AgentCredentialFactory,
]


@pytest.mark.parametrize("factory_class", TENANT_ROWS, ids=lambda c: c.__name__)
def test_each_factory_makes_a_row_only_its_tenant_sees(factory_class, tenant, other_tenant):
    row = factory_class(tenant=tenant)
    model = factory_class._meta.model
    with tenant_scope(tenant.pk):
        assert model.objects.filter(pk=row.pk).exists()
    with tenant_scope(other_tenant.pk):
        assert not model.objects.filter(pk=row.pk).exists()
    assert row.tenant_id == tenant.pk


def test_a_factory_works_inside_another_tenants_scope_and_restores_it(tenant, other_tenant):
    with tenant_scope(other_tenant.pk):
        record = f.MemoryRecordFactory(tenant=tenant)
        assert not MemoryRecord.objects.filter(pk=record.pk).exists()
        f.LegalHoldFactory(tenant=other_tenant)
    with tenant_scope(tenant.pk):
        assert MemoryRecord.objects.filter(pk=record.pk).exists()


def test_related_rows_share_the_tenant_they_are_made_for(tenant):
    conflict = f.ConflictFactory(tenant=tenant)
    rows = [conflict.fact, conflict.fact.scope, conflict.current_record, conflict.contender]
    assert {row.tenant_id for row in rows} == {tenant.pk}
    assert conflict.current_record.fact_id == conflict.contender.fact_id == conflict.fact_id


def test_a_created_record_moves_its_facts_head(tenant):
    conflict = f.ConflictFactory(tenant=tenant)
    with tenant_scope(tenant.pk):
        fact = Fact.objects.get(pk=conflict.fact_id)
    assert fact.current_id == conflict.current_record.pk
    assert fact.last_version == conflict.contender.version == 2
    assert conflict.current_record.is_current
    assert not conflict.contender.is_current
    assert conflict.contender.current_from is None


def test_a_record_takes_its_facts_identity_and_scope(tenant):
    scope = f.ScopeFactory(tenant=tenant, domain="support", conditions={"region": "eu"})
    record = f.MemoryRecordFactory(tenant=tenant, fact__scope=scope, fact__subject="user:7")
    assert (record.subject, record.key) == ("user:7", record.fact.key)
    assert record.scope_domain == "support"
    assert record.scope_conditions == {"region": "eu"}
    with tenant_scope(tenant.pk):
        assert Embedding.objects.count() == 0


def test_the_same_scope_is_one_row(tenant):
    first = f.ScopeFactory(tenant=tenant, conditions={"a": 1})
    again = f.ScopeFactory(tenant=tenant, conditions={"a": 1.0})
    assert first.pk == again.pk
    with tenant_scope(tenant.pk):
        assert Scope.objects.count() == 1


def test_a_summary_is_made_by_the_service(tenant):
    record = f.MemoryRecordFactory(tenant=tenant, sensitivity="restricted")
    summary = f.SummaryFactory(tenant=tenant, sources=[record])
    tenant.refresh_from_db()
    assert tenant.summaries_written
    assert summary.sensitivity == "restricted"
    with tenant_scope(tenant.pk):
        pointer = SummarySource.objects.get(summary=summary)
        assert (pointer.source_id, pointer.fact_id) == (record.pk, record.fact_id)
        assert OutboxMessage.objects.filter(object_id=summary.pk).exists()


def test_audit_events_are_appended_to_the_chain(tenant):
    events = f.AuditEventFactory.create_batch(3, tenant=tenant, action="test.event")
    assert all(event.seq for event in events)
    with tenant_scope(tenant.pk):
        assert AuditEvent.objects.filter(action="test.event").count() == 3
        assert audit_chain_verify().ok


def test_a_credential_carries_the_token_it_was_issued_with(tenant, client):
    credential = f.AgentCredentialFactory(tenant=tenant, actions="read,audit")
    assert credential.actions == ["read", "audit"]
    response = client.get(
        "/api/v1/audit-events", headers={"Authorization": f"Bearer {credential.token}"}
    )
    assert response.status_code == 200


def test_a_person_gets_the_roles_permissions(tenant):
    admin = f.person(tenant, "olivia", "admin")
    assert admin.has_perm("tenancy.manage_members", tenant)
    assert admin.check_password("pw-olivia")


def test_bulk_save_inserts_built_rows_under_each_tenants_context(tenant, other_tenant):
    facts = f.bulk_save(
        [
            *f.FactFactory.build_batch(3, tenant=tenant, scope=f.ScopeFactory(tenant=tenant)),
            *f.FactFactory.build_batch(
                2, tenant=other_tenant, scope=f.ScopeFactory(tenant=other_tenant)
            ),
        ]
    )
    records = f.bulk_save(
        [f.MemoryRecordFactory.build(tenant=fact.tenant, fact=fact) for fact in facts]
    )
    with tenant_scope(tenant.pk):
        assert MemoryRecord.objects.count() == 3
    with tenant_scope(other_tenant.pk):
        assert set(MemoryRecord.objects.values_list("pk", flat=True)) == {r.pk for r in records[3:]}


def test_bulk_save_refuses_rows_of_an_unsaved_tenant(db):
    with pytest.raises(ValueError, match="is not saved"):
        f.bulk_save(f.FactFactory.build_batch(1))
