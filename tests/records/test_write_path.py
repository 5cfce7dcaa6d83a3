"""The write path's shape: few statements, one audit lane per fact."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.audit.selectors import audit_chain_verify
from apps.audit.services import LANES, lane_for
from apps.records.models import Fact, MemoryRecord, Observation
from apps.tenancy.context import tenant_scope
from apps.work.models import OutboxMessage
from tests.factories import AuditChainHeadFactory, bulk_save

from .support import audit_events, write_ok

pytestmark = pytest.mark.django_db


def test_a_new_fact_is_written_in_six_statements(agent, tenant):
    """Lock-or-create the fact (with the class's retention rule), then one statement each for
    the version, its observation, the fact's pointers, the embedding work and the audit
    event."""
    from apps.core.actors import Actor
    from apps.records.serializers import write_input
    from apps.records.services import record_write

    from .factories import body

    actor = Actor("credential", "c-1", "writer")
    data = write_input(body(subject="user:counted"))
    # Every lane open already: a lane's very first event takes two statements more.
    bulk_save(
        [AuditChainHeadFactory.build(tenant=tenant, lane=n) for n in range(LANES)],
        ignore_conflicts=True,
    )
    with tenant_scope(tenant.pk), CaptureQueriesContext(connection) as queries:
        outcome = record_write(tenant=tenant, actor=actor, data=data)
    bookkeeping = ("set_config", "SAVEPOINT", "BEGIN", "COMMIT")
    statements = [
        q["sql"]
        for q in queries.captured_queries
        if not any(word in q["sql"] for word in bookkeeping)
    ]
    assert len(statements) == 6, statements
    with tenant_scope(tenant.pk):
        record = MemoryRecord.objects.get(pk=outcome.record.pk)
        fact = Fact.objects.get(pk=record.fact_id)
        assert fact.current_id == record.pk
        assert fact.last_version == record.version == 1
        assert record.is_current
        assert record.search
        assert Observation.objects.filter(record=record).count() == 1
        assert OutboxMessage.objects.filter(object_id=record.pk, state="pending").count() == 1
        assert audit_chain_verify().ok


@pytest.mark.django_db(transaction=True)
def test_a_writes_events_share_the_lane_of_its_fact(agent, second_agent, review_agent, tenant):
    """Each write is a transaction (ATOMIC_REQUESTS); its first event is keyed by the fact,
    and the rest of that transaction's events take the same lane."""
    first = write_ok(agent)
    write_ok(agent, value="carrier_b", source__ref="interaction:2")  # conflict.open as well
    write_ok(second_agent, source__ref="interaction:3")  # observe + promotion.request
    with tenant_scope(tenant.pk):
        fact_lane = lane_for(str(MemoryRecord.objects.get(pk=first["id"]).fact_id))
    actions = ["record.write", "conflict.open", "record.observe", "promotion.request"]
    events = [e for e in audit_events(tenant) if e.action in actions]
    assert sorted({e.action for e in events}) == sorted(actions)
    assert {e.lane for e in events} == {fact_lane}
    with tenant_scope(tenant.pk):
        assert audit_chain_verify().ok
