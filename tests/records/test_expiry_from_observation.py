"""A record's lifetime counts from when it was observed, not from when it was written: an old
observation keeps only what is left of its lifetime, one already past it is refused, and a
client clock running ahead never lengthens it."""

from __future__ import annotations

import importlib
from datetime import datetime, timedelta
from types import SimpleNamespace

import pytest
from django.db import connection
from django.utils import timezone

from apps.core.actors import Actor
from apps.core.errors import Invalid
from apps.governance.services import retention_rule_set
from apps.records.models import MemoryRecord
from apps.tenancy.context import tenant_scope
from tests.api.support import assert_problem
from tests.factories import MemoryRecordFactory

from .support import audit_events, row_counts, ts, write, write_ok

pytestmark = pytest.mark.django_db


def _ago(delta: timedelta) -> str:
    return (timezone.now() - delta).isoformat(timespec="seconds").replace("+00:00", "Z")


def test_it_counts_expires_at_from_observed_at(agent):
    record = write_ok(agent, observed_at=_ago(timedelta(days=10)), retention__ttl="P30D")
    assert ts(record["expires_at"]) == ts(record["observed_at"]) + timedelta(days=30)
    assert ts(record["expires_at"]) - ts(record["written_at"]) < timedelta(days=21)


def test_it_refuses_an_observation_older_than_its_ttl_and_stores_nothing(agent, tenant):
    before = row_counts(tenant)
    response = write(agent, observed_at=_ago(timedelta(days=31)), retention__ttl="P30D")
    problem = assert_problem(response, 422)
    assert set(problem["errors"]) == {"observed_at", "retention.ttl"}
    assert "counts from observed_at" in problem["errors"]["observed_at"][0]
    assert row_counts(tenant) == before
    [rejected] = audit_events(tenant, "record.write_rejected")
    assert set(rejected.data["fields"]) == {"observed_at", "retention.ttl"}


def test_it_refuses_an_observation_older_than_its_class_rule(agent, tenant):
    # No ttl: the personal class keeps a provisional record 30 days.
    before = row_counts(tenant)
    response = write(
        agent, sensitivity="personal", observed_at=_ago(timedelta(days=31)), retention__ttl=None
    )
    problem = assert_problem(response, 422)
    assert set(problem["errors"]) == {"observed_at", "sensitivity"}
    assert "30 days" in problem["errors"]["sensitivity"][0]
    assert row_counts(tenant) == before


def test_an_observed_at_ahead_of_the_clock_never_lengthens_the_lifetime(agent):
    ahead = (timezone.now() + timedelta(seconds=25)).isoformat().replace("+00:00", "Z")
    record = write_ok(agent, observed_at=ahead, retention__ttl="P7D")
    assert ts(record["expires_at"]) == ts(record["written_at"]) + timedelta(days=7)


def test_a_promoted_record_counts_its_confirmed_lifetime_from_observed_at(
    agent, second_agent, review_agent
):
    observed = _ago(timedelta(days=20))
    first = write_ok(agent, observed_at=observed, retention__ttl=None)  # personal: 365 confirmed
    request_id = write_ok(second_agent, observed_at=observed, source__ref="interaction:9001")[
        "promotion_request"
    ]
    approved = review_agent.post(
        f"/api/v1/promotion-requests/{request_id}/approve", {"reason": "seen twice"}
    )
    assert approved.status_code == 200, approved.content
    record = agent.get(f"/api/v1/records/{first['id']}").json()
    assert record["trust"] == "confirmed"
    assert ts(record["expires_at"]) == ts(observed) + timedelta(days=365)


def test_a_shorter_rule_counts_from_each_records_observation(agent, tenant):
    record = write_ok(agent, observed_at=_ago(timedelta(days=5)), retention__ttl=None)
    with tenant_scope(tenant.pk):
        retention_rule_set(
            tenant=tenant,
            sensitivity="personal",
            provisional_max=timedelta(days=10),
            confirmed_max=timedelta(days=365),
            actor=Actor.system("tests"),
            reason="shorter",
        )
        stored = MemoryRecord.objects.get(pk=record["id"])
    assert stored.expires_at == ts(record["observed_at"]) + timedelta(days=10)


def test_a_rule_shorter_than_a_minute_is_refused(tenant):
    with tenant_scope(tenant.pk), pytest.raises(Invalid, match="one minute"):
        retention_rule_set(
            tenant=tenant,
            sensitivity="personal",
            provisional_max=timedelta(seconds=30),
            confirmed_max=timedelta(days=365),
            actor=Actor.system("tests"),
        )


def _legacy(tenant, *, observed: datetime, written: datetime, expires: datetime, **extra):
    """A version whose lifetime was counted from its write, as before."""
    with tenant_scope(tenant.pk):
        return MemoryRecordFactory(
            tenant=tenant, observed_at=observed, written_at=written, expires_at=expires, **extra
        )


def test_the_migration_counts_live_lifetimes_from_their_observation(tenant):
    migration = importlib.import_module(
        "apps.records.migrations.0012_expiry_counts_from_observation"
    )
    now = timezone.now()
    gap = timedelta(days=10)
    live = _legacy(tenant, observed=now - gap, written=now, expires=now + timedelta(days=30))
    outlived = _legacy(tenant, observed=now - gap, written=now, expires=now + timedelta(days=5))
    past = _legacy(tenant, observed=now - gap, written=now - gap, expires=now - timedelta(days=1))
    fresh = _legacy(tenant, observed=now, written=now, expires=now + timedelta(days=30))
    migration.count_lifetimes_from_observation(None, SimpleNamespace(connection=connection))
    with tenant_scope(tenant.pk):
        after = {r.pk: r.expires_at for r in MemoryRecord.objects.all()}
    assert after[live.pk] == now + timedelta(days=20)
    assert after[outlived.pk] == now - timedelta(days=5)  # expired now, as its time has passed
    assert after[past.pk] == past.expires_at  # history stays as it was
    assert after[fresh.pk] == fresh.expires_at
