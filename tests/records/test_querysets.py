"""The domain predicates, defined once on the querysets: live, expired, current, held, and
the same predicates as the clauses hand-written statements take (apps.records.predicates)."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.db.models import Q
from django.utils import timezone

from apps.audit.services import Actor
from apps.governance import services as governance_services
from apps.records import services
from apps.records.models import (
    Conflict,
    ConflictState,
    Fact,
    LegalHold,
    MemoryRecord,
    record_held,
)
from apps.records.predicates import record_predicate_sql
from apps.records.purge import versions_for_delete_sql, versions_loaded
from apps.records.selectors import record_get
from apps.records.serializers import write_input
from apps.records.trust import open_conflicts_of
from apps.tenancy.context import tenant_scope

from .factories import body

pytestmark = pytest.mark.django_db

ACTOR = Actor("credential", "c1", "writer")
PERSON = Actor.system("legal")


def _write(tenant: Any, **overrides: Any) -> MemoryRecord:
    with tenant_scope(tenant.pk):
        return services.record_write(
            tenant=tenant, actor=ACTOR, data=write_input(body(**overrides))
        ).record


def _expire_at(tenant: Any, record: MemoryRecord, moment: Any) -> None:
    with tenant_scope(tenant.pk):
        MemoryRecord.objects.filter(pk=record.pk).update(expires_at=moment)


def _ids(queryset: Any) -> set[Any]:
    return set(queryset.values_list("pk", flat=True))


def _sql_ids(tenant: Any, name: str, now: Any) -> set[Any]:
    params: dict[str, Any] = {"now": now}
    clause = record_predicate_sql(name, "r", params)
    with tenant_scope(tenant.pk), connection.cursor() as cursor:
        cursor.execute(f"SELECT r.id FROM records_memoryrecord r WHERE {clause}", params)  # noqa: S608 (compiled predicate)
        return {row[0] for row in cursor.fetchall()}


def test_a_record_expiring_exactly_now_is_expired_and_not_live(tenant) -> None:
    now = timezone.now()
    record = _write(tenant)
    _expire_at(tenant, record, now)
    with tenant_scope(tenant.pk):
        assert record.pk not in _ids(MemoryRecord.objects.live(now))
        assert record.pk in _ids(MemoryRecord.objects.expired(now))
        # A microsecond earlier it was still live.
        earlier = now - timedelta(microseconds=1)
        assert record.pk in _ids(MemoryRecord.objects.live(earlier))
        assert record.pk not in _ids(MemoryRecord.objects.expired(earlier))
    assert record.pk not in _sql_ids(tenant, "live", now)
    assert record.pk in _sql_ids(tenant, "live", earlier)


def test_a_hold_keeps_an_expired_record_live_until_it_is_lifted(tenant) -> None:
    record = _write(tenant, subject="user:held")
    other = _write(tenant, subject="user:free")
    now = timezone.now()
    for r in (record, other):
        _expire_at(tenant, r, now - timedelta(minutes=1))
    with tenant_scope(tenant.pk):
        hold = governance_services.legal_hold_place(
            tenant=tenant, actor=PERSON, reason="litigation", subject="user:held"
        )
        assert _ids(MemoryRecord.objects.live(now)) >= {record.pk}
        assert other.pk not in _ids(MemoryRecord.objects.live(now))
        assert _ids(MemoryRecord.objects.held()) == {record.pk}
        assert record.pk not in _ids(MemoryRecord.objects.expired(now).not_held())
        assert LegalHold.objects.active().covering(subject="user:held", fact=None).exists()
    assert record.pk in _sql_ids(tenant, "live", now)
    assert _sql_ids(tenant, "held", now) == {record.pk}
    while_placed = timezone.now()
    with tenant_scope(tenant.pk):
        governance_services.legal_hold_lift(hold=hold, actor=PERSON, reason="settled")
        assert record.pk not in _ids(MemoryRecord.objects.live(now))
        assert not MemoryRecord.objects.held().exists()
        assert not LegalHold.objects.active().exists()
        assert _ids(LegalHold.objects.lifted()) == {hold.pk}
        # In force while it was placed, not after it was lifted.
        assert LegalHold.objects.in_force_at(while_placed).filter(pk=hold.pk).exists()
        assert not LegalHold.objects.in_force_at(timezone.now()).exists()
    assert record.pk not in _sql_ids(tenant, "live", now)


def test_a_hold_on_one_fact_covers_its_versions_only(tenant) -> None:
    record = _write(tenant, subject="user:both", key="a.key")
    sibling = _write(tenant, subject="user:both", key="b.key")
    with tenant_scope(tenant.pk):
        fact = Fact.objects.get(pk=record.fact_id)
        governance_services.legal_hold_place(
            tenant=tenant, actor=PERSON, reason="one fact", fact=fact
        )
        assert _ids(MemoryRecord.objects.held()) == {record.pk}
        assert LegalHold.objects.active().covering(subject="user:none", fact=fact).exists()
        assert not (
            LegalHold.objects.active().covering(subject="user:none", fact=sibling.fact_id).exists()
        )


def test_another_tenants_hold_covers_nothing_here(tenant, other_tenant) -> None:
    record = _write(tenant, subject="user:shared")
    now = timezone.now()
    _expire_at(tenant, record, now - timedelta(minutes=1))
    with tenant_scope(other_tenant.pk):
        governance_services.legal_hold_place(
            tenant=other_tenant, actor=PERSON, reason="theirs", subject="user:shared"
        )
    with tenant_scope(tenant.pk):
        assert not MemoryRecord.objects.held().exists()
        assert record.pk not in _ids(MemoryRecord.objects.live(now))
        assert not LegalHold.objects.active().exists()
    assert record.pk not in _sql_ids(tenant, "live", now)


def test_current_is_each_facts_value_now(tenant) -> None:
    first = _write(tenant, subject="user:c", value="one")
    contender = _write(tenant, subject="user:c", value="two", source__ref="interaction:2")
    with tenant_scope(tenant.pk):
        assert _ids(MemoryRecord.objects.current()) == {first.pk}
        assert contender.pk in _ids(MemoryRecord.objects.live())
    assert _sql_ids(tenant, "current", timezone.now()) == {first.pk}


def test_a_revoked_consent_ends_a_record_unless_held(tenant) -> None:
    retention = {"basis": "consent", "consent_ref": "consent:7", "ttl": "P30D"}
    record = _write(tenant, subject="user:consent", retention=retention)
    with tenant_scope(tenant.pk):
        governance_services.consent_revoke(
            tenant=tenant, consent_ref="consent:7", actor=PERSON, reason="r"
        )
        # The revocation's own update aside, the predicate reads the revocation itself.
        MemoryRecord.objects.filter(pk=record.pk).update(
            status="active", expires_at=timezone.now() + timedelta(days=1)
        )
        now = timezone.now()
        assert record.pk in _ids(MemoryRecord.objects.expired(now))
        assert record.pk not in _ids(MemoryRecord.objects.live(now))
    assert record.pk not in _sql_ids(tenant, "live", now)


def test_open_conflicts_of_is_the_queryset_it_replaced(tenant, other_tenant) -> None:
    """The statement behind ``open_conflicts_of`` (the search's hot path) finds what the
    queryset finds: open conflicts only, both sides live, oldest first, this tenant's."""

    def conflicted(subject: str, tenant: Any = tenant) -> tuple[MemoryRecord, MemoryRecord]:
        first = _write(tenant, subject=subject, value="a")
        return first, _write(tenant, subject=subject, value="b")

    live_pair = conflicted("user:1")
    resolved = conflicted("user:2")
    expired = conflicted("user:3")
    foreign = conflicted("user:4", other_tenant)
    alone = _write(tenant, subject="user:5")
    with tenant_scope(tenant.pk):
        Conflict.objects.filter(contender=resolved[1]).update(state=ConflictState.RESOLVED)
    _expire_at(tenant, expired[1], timezone.now() - timedelta(seconds=1))
    ids = [r.pk for pair in (live_pair, resolved, expired, foreign) for r in pair] + [alone.pk]

    with tenant_scope(tenant.pk):
        live = MemoryRecord.objects.live().values("pk")
        rows = (
            Conflict.objects.filter(state=ConflictState.OPEN)
            .filter(Q(current_record_id__in=ids) | Q(contender_id__in=ids))
            .filter(current_record__in=live, contender__in=live)
            .order_by("opened_at", "id")
            .values_list("pk", "current_record_id", "contender_id")
        )
        expected: dict[Any, Any] = {}
        for conflict_id, *sides in rows:
            for side in sides:
                expected.setdefault(side, conflict_id)
        found = open_conflicts_of(ids)
    assert found == expected
    assert set(found) == {live_pair[0].pk, live_pair[1].pk}


def _fields(record: MemoryRecord | None) -> dict[str, Any] | None:
    if record is None:
        return None
    return {f.attname: getattr(record, f.attname) for f in MemoryRecord._meta.concrete_fields}


def test_a_record_by_id_and_a_facts_versions_are_the_querysets_they_replaced(
    tenant, other_tenant
) -> None:
    """``record_get`` and the deletion's versions are statements over the compiled
    predicates (a request's hot path); they find what the querysets find."""
    now = timezone.now()
    live = _write(tenant, subject="user:live")
    newer = _write(tenant, subject="user:live", value="other")  # a second version, in conflict
    expired = _write(tenant, subject="user:gone")
    held = _write(tenant, subject="user:held")
    restricted = _write(tenant, subject="user:secret", sensitivity="restricted")
    foreign = _write(other_tenant, subject="user:live")
    for record in (expired, held):
        _expire_at(tenant, record, now - timedelta(minutes=1))
    with tenant_scope(tenant.pk):
        governance_services.legal_hold_place(
            tenant=tenant, actor=PERSON, reason="litigation", subject="user:held"
        )
        ids = [r.pk for r in (live, newer, expired, held, restricted, foreign)]
        for sees_restricted in (True, False):
            for pk in [*ids, uuid.uuid4()]:
                queryset = (
                    MemoryRecord.objects.live()
                    .visible(sees_restricted=sees_restricted)
                    .filter(pk=pk)
                    .first()
                )
                found = record_get(pk, sees_restricted=sees_restricted, observations=False)
                assert _fields(found) == _fields(queryset), (pk, sees_restricted)
        with_observations = record_get(live.pk, sees_restricted=True)
        assert with_observations is not None
        assert [o.pk for o in with_observations.observations.all()] == list(
            live.observations.order_by("recorded_at").values_list("pk", flat=True)
        )
        assert record_get("not an id", sees_restricted=True) is None

        for fact_id in (live.fact_id, held.fact_id):
            params: dict[str, Any] = {"fact": fact_id}
            with connection.cursor() as cursor:
                cursor.execute(versions_for_delete_sql(params), params)
                loaded = versions_loaded(cursor.fetchall())
            statement = [
                (v.pk, v.fact_id, v.subject, v.key, v.value, v.content, v.written_at, v.held)
                for v in loaded
            ]
            queryset = [
                (v.pk, v.fact_id, v.subject, v.key, v.value, v.content, v.written_at, v.held)
                for v in MemoryRecord.objects.filter(fact_id=fact_id)
                .annotate(held=record_held())
                .order_by("version")
            ]
            assert statement == queryset
            assert {is_held for *_rest, is_held in statement} == {fact_id == held.fact_id}
