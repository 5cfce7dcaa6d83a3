"""The audit log is append-only and hash-chained per tenant; tampering is detected."""

from __future__ import annotations

import itertools
import threading

import pytest
from django.core.management import CommandError, call_command
from django.db import ProgrammingError, connection

from apps.audit.models import AuditChainHead, AuditEvent
from apps.audit.selectors import audit_chain_verify
from apps.audit.services import GENESIS, audit_record, event_hash
from apps.core.actors import Actor
from apps.tenancy.context import TENANT_SETTING, tenant_scope
from apps.tenancy.selectors import platform_read
from tests.factories import TenantFactory

pytestmark = pytest.mark.django_db

SYSTEM = Actor.system("tests")


def _append(
    tenant, n: int, action: str = "thing.touch", *, one_object: bool = False
) -> list[AuditEvent]:
    """``n`` events, each in a scope of its own; about one object (so one lane) or about ``n``
    objects (several lanes, where each scope is a transaction: in a test's transaction, every
    event takes the lane of its first)."""
    events = []
    for i in range(n):
        with tenant_scope(tenant.pk):
            events.append(
                audit_record(
                    tenant=tenant,
                    actor=SYSTEM,
                    action=action,
                    object_type="thing",
                    object_id="t" if one_object else f"t-{i}",
                    data={"i": i},
                )
            )
    return events


def _lanes(chain: list[AuditEvent]) -> dict[int, list[AuditEvent]]:
    lanes: dict[int, list[AuditEvent]] = {}
    for event in chain:
        lanes.setdefault(event.lane, []).append(event)
    return lanes


def _verify(tenant):
    with tenant_scope(tenant.pk):
        return audit_chain_verify()


def _chain(tenant) -> list[AuditEvent]:
    with tenant_scope(tenant.pk):
        return list(AuditEvent.objects.order_by("seq"))


# --- an intact chain ------------------------------------------------------------------------------


def test_it_verifies_a_chain_of_several_events(tenant):
    _append(tenant, 6)
    result = _verify(tenant)
    assert result.ok
    assert result.checked == len(_chain(tenant)) == 7  # tenant.create + 6
    assert result.broken_seq is None


@pytest.mark.django_db(transaction=True)
def test_it_links_every_event_to_the_previous_one_of_its_lane(tenant):
    _append(tenant, 12)
    chain = _chain(tenant)
    assert [e.seq for e in chain] == sorted(e.seq for e in chain)
    lanes = _lanes(chain)
    assert len(lanes) > 1  # events about different objects spread over lanes
    with tenant_scope(tenant.pk):
        heads = {h.lane: h for h in AuditChainHead.objects.all()}
    for lane, events in lanes.items():
        assert events[0].prev_hash == GENESIS
        for previous, event in itertools.pairwise(events):
            assert event.prev_hash == previous.hash
        assert (heads[lane].count, heads[lane].hash) == (len(events), events[-1].hash)
    for event in chain:
        assert event.hash == event_hash(event)


def test_it_keeps_the_events_of_one_object_in_one_lane(tenant):
    events = _append(tenant, 5, one_object=True)
    assert len({e.lane for e in events}) == 1


def test_the_verify_command_reports_an_intact_chain(tenant, capsys):
    _append(tenant, 3)
    call_command("audit_verify", tenant.slug)
    assert "4 events intact" in capsys.readouterr().out


def test_the_verify_command_refuses_an_unknown_tenant(db):
    with pytest.raises(CommandError, match="no tenant 'nope'"):
        call_command("audit_verify", "nope")


# --- the application role cannot rewrite history --------------------------------------------------


def test_the_application_role_cannot_update_audit_events(tenant):
    event = _append(tenant, 1)[0]
    with pytest.raises(ProgrammingError, match="permission denied"), tenant_scope(tenant.pk):
        AuditEvent.objects.filter(pk=event.pk).update(data={"forged": True})
    event.data = {"forged": True}
    with pytest.raises(ProgrammingError, match="permission denied"), tenant_scope(tenant.pk):
        event.save(update_fields=["data"])
    assert _chain(tenant)[-1].data == {"i": 0}


def test_the_application_role_cannot_delete_audit_events(tenant):
    event = _append(tenant, 1)[0]
    with pytest.raises(ProgrammingError, match="permission denied"), tenant_scope(tenant.pk):
        AuditEvent.objects.filter(pk=event.pk).delete()
    with (
        pytest.raises(ProgrammingError, match="permission denied"),
        tenant_scope(tenant.pk),
        connection.cursor() as cursor,
    ):
        cursor.execute("DELETE FROM audit_auditevent WHERE id = %s", [event.pk])
    with (
        pytest.raises(ProgrammingError, match="permission denied"),
        tenant_scope(tenant.pk),
        connection.cursor() as cursor,
    ):
        cursor.execute("TRUNCATE audit_auditevent")
    assert len(_chain(tenant)) == 2


# --- tampering by someone who can (the owner role) ------------------------------------------------


def _as_owner(owner_connection, tenant, sql: str, params: list) -> int:
    """Run ``sql`` as the owner, inside ``tenant`` (whatever RLS the owner is subject to)."""
    with owner_connection.transaction():
        owner_connection.execute(
            "SELECT set_config(%s, %s, true)", [TENANT_SETTING, str(tenant.pk)]
        )
        return owner_connection.execute(sql, params).rowcount


@pytest.mark.django_db(transaction=True)
def test_it_detects_an_event_rewritten_by_the_owner(tenant, owner_connection):
    _append(tenant, 5)
    assert _verify(tenant).ok
    target = _chain(tenant)[3]
    changed = _as_owner(
        owner_connection,
        tenant,
        "UPDATE audit_auditevent SET data = %s WHERE tenant_id = %s AND seq = %s",
        ['{"i": 999}', tenant.pk, target.seq],
    )
    assert changed == 1
    result = _verify(tenant)
    assert not result.ok
    assert result.broken_seq == target.seq
    assert result.checked == 3
    assert "content" in result.problem
    with pytest.raises(CommandError, match=rf"broken at event #{target.seq}\b"):
        call_command("audit_verify", tenant.slug)


@pytest.mark.django_db(transaction=True)
def test_the_verify_command_names_the_first_of_several_broken_events(tenant, owner_connection):
    _append(tenant, 6)
    chain = _chain(tenant)
    first, later = chain[2].seq, chain[5].seq
    for seq in (later, first):
        _as_owner(
            owner_connection,
            tenant,
            "UPDATE audit_auditevent SET action = 'forged' WHERE tenant_id = %s AND seq = %s",
            [tenant.pk, seq],
        )
    with pytest.raises(CommandError) as excinfo:
        call_command("audit_verify", tenant.slug)
    assert f"#{first}" in str(excinfo.value)
    assert f"#{later}" not in str(excinfo.value)


@pytest.mark.django_db(transaction=True)
def test_it_detects_a_rewrite_that_also_recomputes_the_hash(tenant, owner_connection):
    """Rehashing the forged event hides it from its own check; the next link still breaks."""
    events = _append(tenant, 4, one_object=True)
    forged = events[1]
    forged.data = {"i": 12345}
    _as_owner(
        owner_connection,
        tenant,
        "UPDATE audit_auditevent SET data = %s, hash = %s WHERE id = %s",
        ['{"i": 12345}', event_hash(forged), forged.pk],
    )
    result = _verify(tenant)
    assert not result.ok
    assert result.broken_seq == events[2].seq  # the next event of the same lane
    assert "previous-hash" in result.problem


@pytest.mark.django_db(transaction=True)
def test_it_detects_a_deleted_event(tenant, owner_connection):
    events = _append(tenant, 4, one_object=True)
    _as_owner(
        owner_connection,
        tenant,
        "DELETE FROM audit_auditevent WHERE tenant_id = %s AND seq = %s",
        [tenant.pk, events[1].seq],
    )
    result = _verify(tenant)
    assert (result.ok, result.broken_seq) == (False, events[2].seq)
    assert "previous-hash" in result.problem
    with pytest.raises(CommandError, match=rf"#{events[2].seq}\b"):
        call_command("audit_verify", tenant.slug)


@pytest.mark.django_db(transaction=True)
def test_it_detects_events_deleted_from_the_end_of_a_lane(tenant, owner_connection):
    events = _append(tenant, 4, one_object=True)
    _as_owner(
        owner_connection,
        tenant,
        "DELETE FROM audit_auditevent WHERE tenant_id = %s AND seq >= %s",
        [tenant.pk, events[2].seq],
    )
    result = _verify(tenant)
    assert not result.ok
    assert f"lane {events[0].lane}" in result.problem
    with pytest.raises(CommandError, match="removed"):
        call_command("audit_verify", tenant.slug)


# --- concurrency and independence -----------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_concurrent_appends_in_one_tenant_make_an_intact_chain(tenant):
    threads_count, per_thread = 8, 5
    barrier = threading.Barrier(threads_count)
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            barrier.wait(timeout=30)
            for i in range(per_thread):
                with tenant_scope(tenant.pk):
                    audit_record(
                        tenant=tenant,
                        actor=SYSTEM,
                        action=f"writer.{n}",
                        object_id=f"{n}-{i}" if n % 2 else "hot",
                        data={"i": i},
                    )
        except BaseException as exc:  # surfaced below, in the test's thread
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(threads_count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    chain = _chain(tenant)
    assert len(chain) == 1 + threads_count * per_thread
    assert len({e.seq for e in chain}) == len({e.hash for e in chain}) == len(chain)
    result = _verify(tenant)
    assert result.ok
    assert result.checked == len(chain)


def test_tenants_have_independent_chains(tenant, other_tenant):
    _append(tenant, 3)
    _append(other_tenant, 5)
    _append(tenant, 2)
    ours, theirs = _chain(tenant), _chain(other_tenant)
    assert (len(ours), len(theirs)) == (6, 6)
    assert ours[0].prev_hash == theirs[0].prev_hash == GENESIS
    assert {e.tenant_id for e in ours} == {tenant.pk}
    assert {e.hash for e in ours}.isdisjoint({e.hash for e in theirs})
    assert _verify(tenant).ok
    assert _verify(other_tenant).ok


@pytest.mark.django_db(transaction=True)
def test_tampering_with_one_tenants_chain_leaves_the_others_intact(
    tenant, other_tenant, owner_connection
):
    _append(tenant, 2)
    _append(other_tenant, 2)
    _as_owner(
        owner_connection,
        other_tenant,
        "UPDATE audit_auditevent SET data = '{}' WHERE tenant_id = %s AND seq = %s",
        [other_tenant.pk, _chain(other_tenant)[1].seq],
    )
    assert not _verify(other_tenant).ok
    assert _verify(tenant).ok


# --- platform reads -------------------------------------------------------------------------------


def test_platform_read_reads_each_tenant_in_turn_and_records_why(tenant, other_tenant):
    third = TenantFactory(slug="initech", name="Initech")
    ops = Actor.system("ops")

    def read(current):
        # Inside the tenant's context: only its own rows are visible.
        return set(AuditEvent.objects.values_list("tenant_id", flat=True))

    results = list(platform_read(actor=ops, reason="incident 42", read=read))
    assert [t.slug for t, _ in results] == ["acme", "globex", "initech"]
    for current, seen in results:
        assert seen == {current.pk}
    for current in (tenant, other_tenant, third):
        events = [e for e in _chain(current) if e.action == "platform.read"]
        assert len(events) == 1
        event = events[0]
        assert event.data == {"reason": "incident 42"}
        assert (event.actor_type, event.actor_label) == ("system", "ops")
        assert event.object_id == str(current.pk)
        assert _verify(current).ok


def test_platform_read_refuses_an_empty_reason(tenant, other_tenant):
    for reason in ["", "   ", "\n\t"]:
        with pytest.raises(ValueError, match="reason"):
            list(platform_read(actor=SYSTEM, reason=reason, read=lambda t: None))
    for current in (tenant, other_tenant):
        assert not [e for e in _chain(current) if e.action == "platform.read"]


def test_platform_read_never_leaves_a_tenant_context_behind(tenant, other_tenant):
    list(platform_read(actor=SYSTEM, reason="check", read=lambda t: None))
    from django.db import transaction

    with transaction.atomic():
        assert AuditEvent.objects.count() == 0
