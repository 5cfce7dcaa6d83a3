"""Appending an event in one statement with the change it describes (``audit_append``)."""

from __future__ import annotations

import uuid

import pytest

from apps.audit.models import AuditChainHead, AuditEvent
from apps.audit.selectors import audit_chain_verify
from apps.audit.services import audit_append, audit_event, lane_for
from apps.core.actors import Actor
from apps.records.models import Fact
from apps.records.services import scope_for
from apps.tenancy.context import tenant_scope

pytestmark = pytest.mark.django_db

SYSTEM = Actor.system("tests")
ADD_FACT = (
    "INSERT INTO records_fact (id, tenant_id, subject, key, scope_id, last_version, created_at) "
    "VALUES (%s, %s, %s, 'k', %s, 0, now()) RETURNING id"
)


def _event(tenant, object_id: str, **extra):
    return audit_event(tenant=tenant, actor=SYSTEM, action="fact.add", object_id=object_id, **extra)


def _fresh_lane(tenant) -> str:
    """An object id whose lane has no head yet in ``tenant``."""
    used = set(AuditChainHead.objects.values_list("lane", flat=True))
    for _ in range(1000):
        candidate = str(uuid.uuid4())
        if lane_for(candidate) not in used:
            return candidate
    raise AssertionError("every lane of the test tenant already has a head")


def test_it_stores_the_change_and_its_event_together(tenant):
    with tenant_scope(tenant.pk):
        fact_id = uuid.uuid4()
        scope = scope_for(tenant=tenant, domain="commerce")
        event = audit_append(
            _event(tenant, str(fact_id)),
            alongside=[(ADD_FACT, [fact_id, tenant.pk, "user:1", scope.pk])],
        )
        assert event is not None
        assert event.seq
        assert Fact.objects.filter(pk=fact_id).count() == 1
        assert AuditEvent.objects.filter(pk=event.pk, hash=event.hash).exists()
        assert audit_chain_verify().ok


def test_it_runs_the_change_once_when_the_lane_is_opened_by_it(tenant):
    """The first event of a lane finds no head: the change alongside must not run twice."""
    with tenant_scope(tenant.pk):
        object_id = _fresh_lane(tenant)
        fact_id = uuid.uuid4()
        scope = scope_for(tenant=tenant, domain="commerce")
        event = audit_append(
            _event(tenant, object_id),
            alongside=[(ADD_FACT, [fact_id, tenant.pk, "user:2", scope.pk])],
        )
        assert event is not None
        assert Fact.objects.filter(subject="user:2").count() == 1
        head = AuditChainHead.objects.get(lane=event.lane)
        assert (head.count, head.hash) == (1, event.hash)
        assert audit_chain_verify().ok


def test_it_appends_nothing_when_the_condition_fails(tenant):
    with tenant_scope(tenant.pk):
        before = AuditEvent.objects.count()
        heads = list(AuditChainHead.objects.order_by("lane").values_list("count", "hash"))
        nothing = (
            "UPDATE records_fact SET last_version = last_version + 1 WHERE id = %s RETURNING id"
        )
        event = audit_append(
            _event(tenant, "missing"),
            alongside=[(nothing, [uuid.uuid4()])],
            when="EXISTS (SELECT 1 FROM change_1)",
        )
        assert event is None
        assert AuditEvent.objects.count() == before
        assert list(AuditChainHead.objects.order_by("lane").values_list("count", "hash")) == heads
        assert audit_chain_verify().ok


def test_one_transactions_events_share_the_lane_of_their_key(tenant):
    """Two lanes locked in opposite orders by two transactions would deadlock; events keyed
    by the object a service locked all land on that object's lane."""
    with tenant_scope(tenant.pk):
        events = [
            audit_append(_event(tenant, str(uuid.uuid4()), lane_key="fact-1")) for _ in range(6)
        ]
        assert audit_chain_verify().ok
    assert {event.lane for event in events if event is not None} == {lane_for("fact-1")}
