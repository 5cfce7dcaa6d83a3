"""The whole evaluation, end to end, on a small slice of the shipped set: the product through
its API in a sandbox, beside the fair store and the cache, in one run. The generated sets of
five seeds run in CI's own step (``.ci/run``: ``memoryconsole evaluate --against
store,cache``)."""

from __future__ import annotations

from typing import Any

import pytest

from apps.evaluation.runner import RecordSettings, evaluate
from apps.evaluation.sandbox import SANDBOX_PREFIX, TenantPolicy
from apps.evaluation.scenarios import scenarios_load, scenarios_parse
from apps.tenancy.models import Tenant


@pytest.fixture(scope="module")
def results(small_set_path: Any, django_db_setup: Any, django_db_blocker: Any) -> dict[str, Any]:
    # The sandbox commits nothing (its transaction is rolled back), so a module-wide run
    # leaves the test database as it found it.
    with django_db_blocker.unblock():
        phases: list[str] = []
        found = evaluate(
            scenarios_load(small_set_path),
            against=("store", "cache"),
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
    assert record["decisions"]["redacted_decisions"] == 0
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


def test_the_fair_store_forgets_what_it_should_but_has_no_trust_or_scope_below_the_domain(
    results,
):
    store = results["store"]["decisions"]
    assert store["decisions"] == results["record"]["decisions"]["decisions"]
    # Real delete, TTL, application-side consent and sessions, replace by key.
    assert store["deleted_decisions"] == 0
    assert store["stale_decisions"] == 0
    assert store["redacted_decisions"] == 0
    # No trust: a provisional observation drives an irreversible decision.
    assert store["provisional_irreversible_decisions"] > 0
    assert store["by_class"]["provisional"]["wrong_rate"] > 0


def test_it_reports_missed_and_wrong_per_class_and_per_half(results):
    record = results["record"]["decisions"]
    assert set(record["by_half"]) == {"tuning"}
    for figures in record["by_class"].values():
        assert {"missed_rate", "wrong_rate", "abstention_rate"} <= set(figures)
    assert record["by_class"]["abstain"]["missed_rate"] == 0.0


def test_it_reports_progress_and_leaves_no_sandbox_behind(results):
    assert "writing the scenarios' memories (record)" in results["_phases"]
    assert "deciding (store)" in results["_phases"]
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


def test_a_deliberately_broken_configuration_fails_the_thresholds(
    django_db_setup: Any, django_db_blocker: Any
):
    """Floor at 0.9, no scope filter, provisional memories allowed for irreversible
    decisions: the guarantees catch it."""
    from apps.evaluation.scenarios.generate import build, render

    data = build(25, per_class=3, canaries=False)
    data["decisions"] = [
        d
        for d in data["decisions"]
        if d["half"] == "tuning" and d["class"] in {"wrong_scope", "provisional", "abstain"}
    ]
    broken = RecordSettings(min_similarity=0.9, scope_filter=False, confirmed_for_decisions=False)
    with django_db_blocker.unblock():
        found = evaluate(
            scenarios_parse(render(data).encode(), source="broken"),
            policy=TenantPolicy("hashing-256", auto_promote_on_second_observation=False),
            against=(),
            settings=broken,
        )
    failed = {t["name"] for t in found["thresholds"] if not t["passed"]}
    assert found["passed"] is False
    assert {"record.wrong_scope_decisions", "record.provisional_irreversible_decisions"} <= failed
    assert found["record"]["settings"]["min_similarity"] == 0.9


def test_generated_sets_give_intervals_and_a_class_below_its_recorded_figure_fails(
    tmp_path: Any, django_db_setup: Any, django_db_blocker: Any
):
    """Two seeds on the lexical model (seconds): every class of each half gets an interval,
    and a recorded figure the run falls below fails it, as CI's step would."""
    import json

    from apps.evaluation.gates import BASELINE_FORMAT
    from apps.evaluation.scenarios.generate import CLASSES
    from apps.evaluation.seeded import evaluate_generated

    recorded = tmp_path / "baseline.json"
    recorded.write_text(
        json.dumps(
            {
                "format": BASELINE_FORMAT,
                "embedding_model": "hashing-256",
                "classes": {"held_out": {"paraphrase": {"mean": 1.0, "half_width": 0.0}}},
                "targets_reached": [],
            }
        )
    )
    with django_db_blocker.unblock():
        found = evaluate_generated(
            seeds=[25, 26],
            per_class=1,
            against=("store",),
            policy=TenantPolicy("hashing-256", auto_promote_on_second_observation=False),
            baseline=recorded,
            probes=False,
        )
    record = found["intervals"]["record"]
    assert set(record) == {"tuning", "held_out"}
    assert set(record["held_out"]["by_class"]) == set(CLASSES)
    assert record["held_out"]["all"]["decision_accuracy"]["n"] == 2
    assert set(found["intervals"]) == {"record", "store"}
    assert [t["name"] for t in found["targets"]] == [
        "record.headline_accuracy_over_store",
        "record.headline_missed_rate",
    ]
    gate = next(t for t in found["thresholds"] if t["name"].startswith("record.held_out."))
    # A paraphrase shares no word with its memory: the lexical model cannot find it.
    assert gate["name"] == "record.held_out.paraphrase.decision_accuracy"
    assert gate["passed"] is False
    assert found["passed"] is False
