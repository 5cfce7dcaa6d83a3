"""The whole evaluation, end to end, on a small slice of the shipped set: the product through
its API in a sandbox, beside the cache, in one run. The full set runs in CI's own step
(``.ci/run``: ``memoryconsole evaluate --against cache``)."""

from __future__ import annotations

from typing import Any

import pytest

from apps.evaluation.runner import evaluate
from apps.evaluation.sandbox import SANDBOX_PREFIX, TenantPolicy
from apps.evaluation.scenarios import scenarios_load
from apps.tenancy.models import Tenant


@pytest.fixture(scope="module")
def results(small_set_path: Any, django_db_setup: Any, django_db_blocker: Any) -> dict[str, Any]:
    # The sandbox commits nothing (its transaction is rolled back), so a module-wide run
    # leaves the test database as it found it.
    with django_db_blocker.unblock():
        phases: list[str] = []
        found = evaluate(
            scenarios_load(small_set_path),
            against_cache=True,
            progress=lambda phase, done, total: phases.append(phase),
        )
        found["_phases"] = phases
        found["_tenants_after"] = list(Tenant.objects.values_list("slug", flat=True))
        return found


def test_the_record_keeps_every_guarantee(results):
    record = results["record"]
    assert record["decisions"]["wrong_scope_decisions"] == 0
    assert record["decisions"]["stale_decisions"] == 0
    assert record["decisions"]["provisional_irreversible_decisions"] == 0
    assert record["decisions"]["deleted_decisions"] == 0
    assert record["decisions"]["decision_accuracy"] == 1.0
    assert record["residue"]["residue_rate"] == 0.0, record["residue"]["found"]
    assert record["at_risk"]["at_risk_recall"] == 1.0, record["at_risk"]
    assert record["at_risk"]["at_risk_precision"] == 1.0, record["at_risk"]
    assert results["passed"] is True, [t for t in results["thresholds"] if not t["passed"]]


def test_it_probes_every_place_an_agent_or_operator_reads(results):
    probed = results["record"]["residue"]["places_probed"]
    per_canary = probed / results["record"]["residue"]["canaries"]
    assert per_canary >= 18
    assert results["record"]["residue"]["by_removal"].keys() == {
        "delete",
        "erase",
        "redact",
        "expire_ttl",
        "revoke_consent",
        "close_run",
    }


def test_the_cache_on_the_same_scenarios_acts_on_what_it_must_not(results):
    cache = results["cache"]
    assert cache["decisions"]["decisions"] == results["record"]["decisions"]["decisions"]
    assert cache["decisions"]["wrong_scope_decisions"] > 0
    assert cache["decisions"]["deleted_decisions"] > 0
    assert cache["decisions"]["provisional_irreversible_decisions"] > 0
    assert cache["residue"]["residue_rate"] == 1.0
    assert (
        cache["decisions"]["decision_accuracy"]
        < results["record"]["decisions"]["decision_accuracy"]
    )


def test_it_reports_progress_and_leaves_no_sandbox_behind(results):
    assert "writing the scenarios' memories" in results["_phases"]
    assert not [slug for slug in results["_tenants_after"] if slug.startswith(SANDBOX_PREFIX)]


@pytest.mark.django_db
def test_a_sandbox_copies_the_tenants_configuration_not_its_data(tenant):
    from datetime import timedelta

    from apps.core.actors import Actor
    from apps.governance.services import retention_rule_set
    from apps.tenancy.context import tenant_scope

    Tenant.objects.filter(pk=tenant.pk).update(embedding_model="client-384")
    tenant.refresh_from_db()
    with tenant_scope(tenant.pk):
        retention_rule_set(
            tenant=tenant,
            sensitivity="personal",
            provisional_max=timedelta(days=3),
            confirmed_max=timedelta(days=60),
            actor=Actor.system("t"),
            reason="shorter",
        )
    policy = TenantPolicy.of(tenant)
    assert policy.embedding_model == "hashing-256"  # agents send vectors: a built-in one runs
    assert "client-384" in policy.note
    assert policy.retention_rules == (("personal", timedelta(days=3), timedelta(days=60)),)
