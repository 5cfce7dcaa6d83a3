"""Appending an event in one statement with the change it describes (``audit_append``)."""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from django.db import connections, transaction

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


@pytest.mark.django_db(transaction=True)
def test_it_runs_the_change_once_when_the_lane_is_opened_by_it(tenant):
    """The first event of a lane finds no head: the change alongside must not run twice.
    (The append is its transaction's first: later ones take the lane of the first.)"""
    with tenant_scope(tenant.pk):
        scope = scope_for(tenant=tenant, domain="commerce")
        object_id = _fresh_lane(tenant)
    fact_id = uuid.uuid4()
    with tenant_scope(tenant.pk):
        event = audit_append(
            _event(tenant, object_id),
            alongside=[(ADD_FACT, [fact_id, tenant.pk, "user:2", scope.pk])],
        )
    with tenant_scope(tenant.pk):
        assert event is not None
        assert event.lane == lane_for(object_id)
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


@pytest.mark.django_db(transaction=True)
def test_one_transactions_events_share_the_lane_of_their_key(tenant):
    """Events keyed by the object a service locked land on that object's lane."""
    with tenant_scope(tenant.pk):
        events = [
            audit_append(_event(tenant, str(uuid.uuid4()), lane_key="fact-1")) for _ in range(6)
        ]
    with tenant_scope(tenant.pk):
        assert audit_chain_verify().ok
    assert {event.lane for event in events if event is not None} == {lane_for("fact-1")}


def _keys_on_two_lanes() -> tuple[str, str]:
    first = "object-a"
    second = next(
        key for key in (f"object-{n}" for n in range(1000)) if lane_for(key) != lane_for(first)
    )
    return first, second


@pytest.mark.django_db(transaction=True)
def test_every_event_of_a_transaction_goes_to_the_lane_of_its_first(tenant):
    """Events about different objects in one transaction share the first one's lane; the
    next transaction starts on the lane of its own first event. A bulk decision (many
    facts, one transaction) therefore holds one lane's head, whatever it touches."""
    first, second = _keys_on_two_lanes()
    with tenant_scope(tenant.pk):
        events = [audit_append(_event(tenant, key)) for key in (first, second, first, second)]
    with tenant_scope(tenant.pk):
        after = audit_append(_event(tenant, second))
        assert audit_chain_verify().ok
    assert [e.lane if e else None for e in events] == [lane_for(first)] * 4
    assert after is not None
    assert after.lane == lane_for(second)


@pytest.mark.django_db(transaction=True)
def test_a_transaction_after_a_rollback_takes_the_lane_of_its_own_first_event(tenant):
    """A rolled-back first append leaves no lane behind, neither for the rest of its
    transaction (a savepoint rolled back) nor for the next transaction."""
    first, second = _keys_on_two_lanes()

    def rolled_back() -> None:
        with transaction.atomic():
            audit_append(_event(tenant, first))
            raise RuntimeError("rolled back")

    def rolled_back_in_its_scope() -> None:
        with tenant_scope(tenant.pk):
            rolled_back()

    with pytest.raises(RuntimeError):
        rolled_back_in_its_scope()  # a whole transaction
    with tenant_scope(tenant.pk):
        with pytest.raises(RuntimeError):
            rolled_back()  # a savepoint: the transaction goes on without its append
        event = audit_append(_event(tenant, second))
        later = audit_append(_event(tenant, first))
    with tenant_scope(tenant.pk):
        assert audit_chain_verify().ok
    lanes = [e.lane if e is not None else None for e in (event, later)]
    assert lanes == [lane_for(second), lane_for(second)]


@pytest.mark.django_db(transaction=True)
def test_two_transactions_appending_about_two_objects_in_opposite_orders_both_commit(tenant):
    """Each appends about A and B (one of them in the order B, A), both holding their first
    lane's head when they append the second event: on two lanes each, they would wait for
    each other (a deadlock PostgreSQL ends by failing one); on one lane each, neither waits."""
    first, second = _keys_on_two_lanes()
    both_appended_once = threading.Barrier(2, timeout=20)

    def appender(keys: tuple[str, str]) -> Any:
        try:
            with tenant_scope(tenant.pk), transaction.atomic():
                audit_append(_event(tenant, keys[0]))
                both_appended_once.wait()
                return audit_append(_event(tenant, keys[1])).lane
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=2) as pool:
        lanes = list(pool.map(appender, [(first, second), (second, first)], timeout=60))
    assert sorted(lanes) == sorted([lane_for(first), lane_for(second)])
    with tenant_scope(tenant.pk):
        assert audit_chain_verify().ok
        assert AuditEvent.objects.filter(object_id__in=[first, second]).count() == 4
