"""The records services called directly, as the console and Celery tasks call them:
retention arithmetic, compaction, legal holds, consent revocation."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from apps.api.models import IdempotencyKey
from apps.audit.models import DeletionReceipt
from apps.core.actors import Actor
from apps.governance import services as governance
from apps.records import purge, services, signals
from apps.records.models import (
    Conflict,
    ConsentRevocation,
    Fact,
    MemoryRecord,
    Observation,
    RetentionRule,
    lifetime,
)
from apps.records.serializers import write_input
from apps.records.tasks import compact_expired
from apps.tenancy.context import tenant_scope
from tests.factories import ConsentRevocationFactory, RetentionRuleFactory

from .factories import WriteBodyFactory, body
from .support import RECORDS, audit_events, expire, write_ok

pytestmark = pytest.mark.django_db

LEGAL = Actor.system("legal")


def _write(tenant, actor, **overrides):
    with tenant_scope(tenant.pk):
        return services.record_write(
            tenant=tenant, actor=actor, data=write_input(body(**overrides))
        )


def _compact(tenant):
    with tenant_scope(tenant.pk):
        return purge.records_compact_expired()


def _exists(tenant, record_id):
    with tenant_scope(tenant.pk):
        return MemoryRecord.objects.filter(pk=record_id).exists()


def _hold(tenant, **target):
    with tenant_scope(tenant.pk):
        return governance.legal_hold_place(
            tenant=tenant, actor=LEGAL, reason="litigation", **target
        )


# --- lifetimes --------------------------------------------------------------------------------


def test_it_applies_the_tenants_own_retention_rule(tenant, agent):
    RetentionRuleFactory(
        tenant=tenant,
        sensitivity="personal",
        provisional_max=timedelta(days=2),
        confirmed_max=timedelta(days=20),
    )
    record = write_ok(agent, retention__ttl=None)
    observed = timezone.datetime.fromisoformat(record["observed_at"])
    assert timezone.datetime.fromisoformat(record["expires_at"]) - observed == timedelta(days=2)


def test_it_keeps_another_tenants_retention_rule_to_itself(tenant, other_tenant, agent):
    RetentionRuleFactory(
        tenant=other_tenant,
        sensitivity="personal",
        provisional_max=timedelta(days=1),
        confirmed_max=None,
    )
    record = write_ok(agent, retention__ttl=None)
    observed = timezone.datetime.fromisoformat(record["observed_at"])
    assert timezone.datetime.fromisoformat(record["expires_at"]) - observed == timedelta(days=30)


@pytest.mark.parametrize(
    ("trust", "ttl", "expected", "clipped"),
    [
        ("provisional", None, timedelta(days=30), False),
        ("provisional", timedelta(days=10), timedelta(days=10), False),
        ("provisional", timedelta(days=30), timedelta(days=30), False),
        ("provisional", timedelta(days=31), timedelta(days=30), True),
        ("confirmed", None, timedelta(days=365), False),
        ("confirmed", timedelta(days=400), timedelta(days=365), True),
    ],
)
def test_it_computes_the_shorter_of_ttl_and_class_rule(tenant, trust, ttl, expected, clipped):
    written = timezone.now()
    with tenant_scope(tenant.pk):
        life = lifetime(
            sensitivity="personal", trust=trust, ttl=ttl, observed_at=written, written_at=written
        )
    assert life.expires_at == written + expected
    assert life.clipped is clipped


def test_it_gives_confirmed_public_records_no_end_without_a_ttl(tenant):
    with tenant_scope(tenant.pk):
        now = timezone.now()
        life = lifetime(
            sensitivity="public", trust="confirmed", ttl=None, observed_at=now, written_at=now
        )
    assert life.expires_at is None


# --- the write service ------------------------------------------------------------------------


def test_a_session_write_fails_loudly_when_no_app_checks_its_run(tenant, agent, monkeypatch):
    # The state app receives the contract (apps/state/receivers.py); without a receiver, a
    # session write must not pass unchecked.
    monkeypatch.setattr(signals.session_run_open, "receivers", [])
    actor = Actor.for_credential(agent.credential)
    with pytest.raises(LookupError, match="session_run_open"):
        _write(tenant, actor, retention={"basis": "session"}, source__run_id=str(uuid.uuid4()))
    with tenant_scope(tenant.pk):
        assert not MemoryRecord.objects.exists()


def test_it_numbers_versions_per_fact(tenant, agent):
    actor = Actor.for_credential(agent.credential)
    a1 = _write(tenant, actor, value="a", source__ref="r:1")
    a2 = _write(tenant, actor, value="b", source__ref="r:2")
    other = _write(tenant, actor, key="language", value="de", source__ref="r:3")
    assert (a1.record.version, a2.record.version, other.record.version) == (1, 2, 1)
    assert (a1.outcome, a2.outcome, other.outcome) == ("created", "conflict", "created")


def test_it_counts_the_system_as_independent_of_an_agent(tenant, agent):
    written = _write(tenant, Actor.for_credential(agent.credential))
    observed = _write(tenant, Actor.system("importer"), source__ref="import:1")
    assert observed.outcome == "observed"
    assert observed.promotion_request is not None
    assert observed.record.pk == written.record.pk


def test_it_audits_every_write_with_a_digest_and_no_content(tenant, agent):
    write_ok(agent, value="carrier-secret-1")
    [event] = audit_events(tenant, "record.write")
    assert len(event.digest) == 64
    assert "carrier-secret-1" not in str(event.data)


# --- compaction ---------------------------------------------------------------------------------


def test_it_compacts_an_expired_fact_through_the_deletion_path(tenant, agent):
    record = write_ok(agent)
    expire(tenant, record["id"])
    assert _compact(tenant) == 1
    assert not _exists(tenant, record["id"])
    with tenant_scope(tenant.pk):
        receipt = DeletionReceipt.objects.get()
        assert Fact.objects.count() == 0
        assert Observation.objects.count() == 0
    assert receipt.kind == "expiry"
    assert receipt.record_ids == [record["id"]]
    assert receipt.requested_by_type == "system"
    [event] = audit_events(tenant, "record.delete")
    assert event.data["kind"] == "expiry"


def test_it_leaves_live_facts_alone_when_compacting(tenant, agent):
    live = write_ok(agent, key="live.fact")
    expired = write_ok(agent)
    expire(tenant, expired["id"])
    _compact(tenant)
    assert _exists(tenant, live["id"])
    assert not _exists(tenant, expired["id"])


def test_it_compacts_nothing_when_nothing_expired(tenant, agent):
    write_ok(agent)
    assert _compact(tenant) == 0
    with tenant_scope(tenant.pk):
        assert DeletionReceipt.objects.count() == 0


def test_it_does_not_compact_a_held_fact(tenant, agent):
    record = write_ok(agent)
    expire(tenant, record["id"])
    _hold(tenant, subject="user:8812")
    assert _compact(tenant) == 0
    assert _exists(tenant, record["id"])


def test_it_compacts_a_fact_once_its_hold_is_lifted(tenant, agent):
    record = write_ok(agent)
    expire(tenant, record["id"])
    hold = _hold(tenant, subject="user:8812")
    with tenant_scope(tenant.pk):
        governance.legal_hold_lift(hold=hold, actor=LEGAL, reason="case closed")
    assert _compact(tenant) == 1
    assert not _exists(tenant, record["id"])


def test_it_does_not_compact_a_live_contender_of_an_expired_current(tenant, agent):
    first = write_ok(agent)
    contender = write_ok(agent, value="carrier_b", source__ref="interaction:5000")
    expire(tenant, first["id"])
    _compact(tenant)
    assert not _exists(tenant, first["id"])
    assert _exists(tenant, contender["id"])
    assert agent.get(f"{RECORDS}/{contender['id']}").status_code == 200


def test_it_compacts_an_expired_superseded_version_of_a_live_fact(tenant, agent, review_agent):
    first = write_ok(agent)
    second = write_ok(agent, value="carrier_b", source__ref="interaction:5000")
    review_agent.post(
        f"/api/v1/conflicts/{second['conflict']}/resolve",
        {"resolution": "accept_new", "reason": "the customer moved"},
    )
    expire(tenant, first["id"])
    assert _compact(tenant) == 1
    assert not _exists(tenant, first["id"])
    assert _exists(tenant, second["id"])
    with tenant_scope(tenant.pk):
        receipt = DeletionReceipt.objects.get()
        fact = Fact.objects.get()
    assert receipt.record_ids == [first["id"]]
    assert receipt.kind == "expiry"
    assert str(fact.current_id) == second["id"]
    history = agent.get(f"{RECORDS}/{second['id']}/history").json()["versions"]
    assert [v["id"] for v in history] == [second["id"]]


def test_it_compacts_records_of_a_revoked_consent(tenant, agent):
    record = write_ok(agent, retention__basis="consent", retention__consent_ref="consent:1")
    with tenant_scope(tenant.pk):
        governance.consent_revoke(tenant=tenant, consent_ref="consent:1", actor=LEGAL, reason="x")
    assert _compact(tenant) == 1
    assert not _exists(tenant, record["id"])


def test_it_tombstones_stored_responses_when_compacting(tenant, agent):
    response = agent.post(RECORDS, body(), headers={"Idempotency-Key": "k-compact"})
    expire(tenant, response.json()["id"])
    _compact(tenant)
    with tenant_scope(tenant.pk):
        # Only a content-free tombstone is left, so a retry replays "deleted".
        assert not IdempotencyKey.objects.filter(tombstone=False).exists()


def test_it_compacts_only_the_current_tenant(tenant, other_tenant, agent, other_agent):
    mine = write_ok(agent)
    theirs = write_ok(other_agent)
    expire(tenant, mine["id"])
    expire(other_tenant, theirs["id"])
    _compact(tenant)
    assert not _exists(tenant, mine["id"])
    assert _exists(other_tenant, theirs["id"])


def test_it_compacts_from_the_celery_task_in_tenant_context(tenant, agent):
    record = write_ok(agent)
    expire(tenant, record["id"])
    with tenant_scope(tenant.pk):
        assert compact_expired() == 1
    assert not _exists(tenant, record["id"])


# --- legal holds --------------------------------------------------------------------------------


def test_it_refuses_a_hold_without_a_reason(tenant):
    with tenant_scope(tenant.pk), pytest.raises(services.RecordError):
        governance.legal_hold_place(tenant=tenant, actor=LEGAL, reason=" ", subject="user:1")


def test_it_refuses_to_delete_a_held_record_in_the_service(tenant, agent):
    written = _write(tenant, Actor.for_credential(agent.credential))
    _hold(tenant, subject="user:8812")
    with tenant_scope(tenant.pk), pytest.raises(purge.Held):
        purge.record_delete(record=written.record, actor=LEGAL, reason="x")
    assert _exists(tenant, written.record.pk)


def test_it_deletes_and_refuses_the_same_where_the_server_binds(
    tenant, agent, delete_agent, monkeypatch
):
    """With server-side binding (a database option) a query string holds one statement: the
    setting, the fact's lock and the versions' read go apart, with the same outcomes."""
    options = {**connection.settings_dict["OPTIONS"], "server_side_binding": True}
    monkeypatch.setitem(connection.settings_dict, "OPTIONS", options)
    held = write_ok(agent)
    free = write_ok(agent, subject="user:1", source__ref="interaction:1")
    _hold(tenant, subject="user:8812")
    answer = delete_agent.delete(f"{RECORDS}/{free['id']}")
    assert answer.status_code == 200
    assert answer.json()["records"] == [free["id"]]
    assert not _exists(tenant, free["id"])
    assert delete_agent.delete(f"{RECORDS}/{held['id']}").status_code == 409
    assert _exists(tenant, held["id"])


def test_it_holds_only_the_subject_named(tenant, agent, delete_agent):
    held = write_ok(agent)
    free = write_ok(agent, subject="user:1", source__ref="interaction:1")
    _hold(tenant, subject="user:8812")
    assert delete_agent.delete(f"{RECORDS}/{free['id']}").status_code == 200
    assert delete_agent.delete(f"{RECORDS}/{held['id']}").status_code == 409


def test_it_audits_placing_and_lifting_a_hold(tenant):
    hold = _hold(tenant, subject="user:8812")
    with tenant_scope(tenant.pk):
        governance.legal_hold_lift(hold=hold, actor=LEGAL, reason="case closed")
        governance.legal_hold_lift(
            hold=hold, actor=LEGAL, reason="case closed"
        )  # lifting twice changes nothing
    assert [e.action for e in audit_events(tenant) if e.action.startswith("legal_hold")] == [
        "legal_hold.place",
        "legal_hold.lift",
    ]


# --- consent --------------------------------------------------------------------------------------


def test_it_revokes_a_consent_idempotently_in_the_service(tenant, agent):
    write_ok(agent, retention__basis="consent", retention__consent_ref="consent:1")
    with tenant_scope(tenant.pk):
        first = governance.consent_revoke(
            tenant=tenant, consent_ref="consent:1", actor=LEGAL, reason="withdrawn"
        )
        second = governance.consent_revoke(
            tenant=tenant, consent_ref="consent:1", actor=LEGAL, reason="withdrawn"
        )
        assert ConsentRevocation.objects.count() == 1
    assert first.pk == second.pk
    assert first.records_expired == 1


def test_it_hides_a_record_written_under_a_consent_revoked_meanwhile(tenant, agent):
    """A write that passed the revocation check just before the revocation committed must not
    survive it: revocation is part of the read-time expiry predicate."""
    record = write_ok(agent, retention__basis="consent", retention__consent_ref="consent:1")
    ConsentRevocationFactory(tenant=tenant, consent_ref="consent:1", revoked_by_label="x")
    assert agent.get(f"{RECORDS}/{record['id']}").status_code == 404


def test_it_tombstones_stored_responses_about_records_of_a_revoked_consent(tenant, agent):
    data = body(retention={"basis": "consent", "consent_ref": "consent:1"})
    agent.post(RECORDS, data, headers={"Idempotency-Key": "k-consent"})
    with tenant_scope(tenant.pk):
        governance.consent_revoke(
            tenant=tenant, consent_ref="consent:1", actor=LEGAL, reason="withdrawn"
        )
        # Only a content-free tombstone is left, so a retry replays "deleted".
        assert not IdempotencyKey.objects.filter(tombstone=False).exists()
    replay = agent.post(RECORDS, data, headers={"Idempotency-Key": "k-consent"})
    assert replay["Idempotent-Tombstone"] == "true"
    assert replay.status_code == 410
    assert replay.json()["state"] == "deleted"
    assert "carrier_a" not in replay.content.decode()


def test_it_opens_one_conflict_per_contender(tenant, agent):
    for n, value in enumerate(["a", "b", "c"]):
        write_ok(agent, value=value, source__ref=f"r:{n}")
    with tenant_scope(tenant.pk):
        assert Conflict.objects.filter(state="open").count() == 2
        assert Fact.objects.get().last_version == 3


def test_it_builds_valid_bodies_in_the_factory():
    data = WriteBodyFactory()
    assert write_input(data).subject.startswith("user:")


def test_it_sets_a_retention_rule_through_the_service_and_audits_it(tenant):
    from datetime import timedelta

    from apps.audit.models import AuditEvent
    from apps.core.actors import Actor
    from apps.governance.services import retention_rule_set
    from apps.records.models import class_limits
    from apps.tenancy.context import tenant_scope

    with tenant_scope(tenant.pk):
        retention_rule_set(
            tenant=tenant,
            sensitivity="personal",
            provisional_max=timedelta(days=3),
            confirmed_max=timedelta(days=60),
            actor=Actor.system("tests"),
        )
        assert class_limits("personal") == (timedelta(days=3), timedelta(days=60))
        assert AuditEvent.objects.filter(action="retention.set").count() == 1


def test_it_refuses_a_confirmed_lifetime_shorter_than_the_provisional_one(tenant):
    from datetime import timedelta

    from apps.core.actors import Actor
    from apps.core.errors import Invalid
    from apps.governance.services import retention_rule_set
    from apps.tenancy.context import tenant_scope

    with tenant_scope(tenant.pk):
        with pytest.raises(Invalid, match="Confirmed"):
            retention_rule_set(
                tenant=tenant,
                sensitivity="personal",
                provisional_max=timedelta(days=30),
                confirmed_max=timedelta(days=3),
                actor=Actor.system("tests"),
            )
        assert not RetentionRule.objects.exists()
