"""A commit claims the obligation in one statement with its audit event; whatever the claim
does not match goes through the locked path, with the same outcomes as before."""

from __future__ import annotations

from typing import Any

import pytest

from apps.audit.selectors import audit_chain_verify
from apps.core.actors import Actor
from apps.state import services
from apps.state.models import Obligation
from apps.tenancy.context import tenant_scope

from .support import audit_events

pytestmark = pytest.mark.django_db

AGENT = Actor(type="credential", id="c-1", label="agent one")


def _obligation(tenant: Any, key: str, **fields: Any) -> Obligation:
    with tenant_scope(tenant.pk):
        return services.obligation_create(
            tenant=tenant, task_id="task-1", kind="charge", key=key, actor=AGENT, **fields
        ).obligation


def _commit(tenant: Any, obligation: Obligation, result: Any) -> services.CommitOutcome:
    with tenant_scope(tenant.pk):
        return services.obligation_commit(obligation=obligation, result=result, actor=AGENT)


def _stored(tenant: Any, obligation: Obligation) -> Obligation:
    with tenant_scope(tenant.pk):
        return Obligation.objects.get(pk=obligation.pk)


def test_the_returned_obligation_is_the_stored_row(tenant):
    obligation = _obligation(tenant, "k", payload={"amount": 5})
    outcome = _commit(tenant, obligation, {"charge": "ch_1"})
    stored = _stored(tenant, obligation)
    assert outcome.committed
    for field in Obligation._meta.concrete_fields:
        assert getattr(outcome.obligation, field.attname) == getattr(stored, field.attname), field
    assert obligation.state == "pending"  # the caller's instance is left as it was read
    assert [e.action for e in audit_events(tenant, "obligation.commit")] == ["obligation.commit"]
    with tenant_scope(tenant.pk):
        assert audit_chain_verify().ok


def test_a_missing_result_is_stored_as_null(tenant):
    obligation = _obligation(tenant, "k")
    assert _commit(tenant, obligation, None).committed
    with tenant_scope(tenant.pk):
        assert Obligation.objects.filter(pk=obligation.pk, result__isnull=True).exists()


def test_it_commits_once_its_dependencies_are_committed(tenant):
    charge = _obligation(tenant, "charge")
    email = _obligation(tenant, "email", depends_on=[charge.pk])
    assert _commit(tenant, email, None).refusal == "dependencies"
    assert _stored(tenant, email).state == "pending"
    assert _commit(tenant, charge, {"ok": 1}).committed
    assert _commit(tenant, email, {"ok": 2}).committed
    assert [e.action for e in audit_events(tenant) if e.action.startswith("obligation.commit")] == [
        "obligation.commit_refused",
        "obligation.commit",
        "obligation.commit",
    ]


def test_it_refuses_a_failed_obligation(tenant):
    obligation = _obligation(tenant, "k")
    with tenant_scope(tenant.pk):
        services.obligation_fail(obligation=obligation, reason="card declined", actor=AGENT)
    outcome = _commit(tenant, obligation, {"late": True})
    assert (outcome.committed, outcome.refusal) == (False, "not_pending")
    stored = _stored(tenant, obligation)
    assert (stored.state, stored.result) == ("failed", None)
