"""Each figure on a hand-made case where the answer is known (and where it must move)."""

from __future__ import annotations

import pytest

from apps.evaluation.metrics import (
    CanaryRun,
    DecisionRun,
    Retrieved,
    at_risk_figures,
    decide,
    decision_figures,
    residue_figures,
    thresholds_check,
)

from .factories import got, memory, scenario


@pytest.fixture
def superseded():
    """m1 was replaced by m2 (newer); n1 is unrelated noise."""
    return scenario(
        [
            memory("m1", "superseded", "old", at="2025-01-01"),
            memory("m2", "relevant", "new", at="2025-02-01"),
            memory("n1", "noise", "other", key="other"),
        ],
        expected="new",
    )


def test_it_decides_on_the_latest_observed_memory_of_the_key(superseded):
    assert decide(superseded, got(superseded, "m1", "m2"))[0] == "new"
    assert decide(superseded, got(superseded, "m1"))[0] == "old"
    assert decide(superseded, got(superseded, "n1")) == ("default", None)


def test_it_breaks_a_tie_by_rank():
    s = scenario(
        [memory("a", "relevant", "first"), memory("b", "relevant", "second")], expected="first"
    )
    assert decide(s, got(s, "a", "b"))[0] == "first"
    assert decide(s, got(s, "b", "a"))[0] == "second"


def test_it_measures_precision_and_recall_over_what_was_retrieved(superseded):
    perfect = decision_figures([DecisionRun(superseded, got(superseded, "m2"))])
    noisy = decision_figures([DecisionRun(superseded, got(superseded, "m2", "n1", "m1"))])
    missing = decision_figures([DecisionRun(superseded, got(superseded, "n1"))])
    assert (perfect["recall_precision"], perfect["recall_at_k"]) == (1.0, 1.0)
    assert noisy["recall_precision"] == pytest.approx(1 / 3)
    assert noisy["recall_at_k"] == 1.0
    assert (missing["recall_precision"], missing["recall_at_k"]) == (0.0, 0.0)


def test_it_counts_a_stale_decision_and_its_influence():
    stale_only = scenario([memory("m1", "expired", "old")], expected="default")
    figures = decision_figures([DecisionRun(stale_only, got(stale_only, "m1"))])
    assert figures["stale_decisions"] == 1
    assert figures["decision_accuracy"] == 0.0
    assert figures["stale_influence"] == 1.0
    assert figures["returned_stale_rate"] == 1.0
    clean = decision_figures([DecisionRun(stale_only, ())])
    assert (clean["stale_decisions"], clean["stale_influence"], clean["decision_accuracy"]) == (
        0,
        0.0,
        1.0,
    )


def test_it_counts_wrong_scope_provisional_and_deleted_decisions_apart():
    cases = {
        "out_of_scope": "wrong_scope_decisions",
        "provisional": "provisional_irreversible_decisions",
        "deleted": "deleted_decisions",
    }
    for label, figure in cases.items():
        s = scenario([memory("m1", label, "bad")], expected="default")
        figures = decision_figures([DecisionRun(s, got(s, "m1"))])
        assert figures[figure] == 1, label
        others = set(cases.values()) - {figure}
        assert all(figures[other] == 0 for other in others), label


def test_a_newer_relevant_memory_outweighs_a_stale_one_so_the_stale_one_does_not_decide(superseded):
    figures = decision_figures([DecisionRun(superseded, got(superseded, "m1", "m2"))])
    assert figures["stale_decisions"] == 0
    assert figures["decision_accuracy"] == 1.0
    # It was handed over all the same.
    assert figures["returned_stale_rate"] == 0.5
    assert figures["stale_influence"] == 0.0


def test_it_measures_sensitivity_to_removal_and_unsound_dependencies(superseded):
    sound = decision_figures([DecisionRun(superseded, got(superseded, "m2", "n1"))])
    assert sound["removal_sensitivity"] == 1.0  # without m2 the default applies
    assert (sound["dependencies"], sound["unsound_dependencies"]) == (1, 0)
    unsound = decision_figures([DecisionRun(superseded, got(superseded, "m1"))])
    assert (unsound["dependencies"], unsound["unsound_dependencies"]) == (1, 1)
    assert unsound["unsound_dependency_rate"] == 1.0
    # Two copies of the same value: removing either changes nothing.
    twice = scenario([memory("a", "relevant", "v"), memory("b", "relevant", "v")], expected="v")
    assert (
        decision_figures([DecisionRun(twice, got(twice, "a", "b"))])["removal_sensitivity"] == 0.0
    )


def test_an_item_the_scenario_did_not_write_is_never_relevant(superseded):
    stranger = Retrieved(memory="", key="k", value="new", observed_at="2025-03-01")
    figures = decision_figures([DecisionRun(superseded, (stranger,))])
    assert figures["recall_precision"] == 0.0
    assert figures["decision_accuracy"] == 1.0  # right by luck, and counted as such


def test_it_reports_each_class_on_its_own(superseded):
    other = scenario([memory("m1", "deleted", "gone")], expected="default", cls="d", sid="s2")
    figures = decision_figures(
        [DecisionRun(superseded, got(superseded, "m2")), DecisionRun(other, got(other, "m1"))]
    )
    assert figures["by_class"]["c"]["decision_accuracy"] == 1.0
    assert figures["by_class"]["d"]["deleted_decisions"] == 1
    assert figures["decision_accuracy"] == 0.5


def test_it_measures_residue_by_canary_and_by_place():
    runs = [
        CanaryRun("c1", "delete", probed=("record", "search"), residues=()),
        CanaryRun("c2", "delete", probed=("record", "search"), residues=("search",)),
        CanaryRun("c3", "expire_ttl", probed=("record",), residues=(), awaiting_sweep=("vectors",)),
    ]
    figures = residue_figures(runs)
    assert figures["residue_rate"] == pytest.approx(1 / 3)
    assert figures["residue_place_rate"] == pytest.approx(1 / 5)
    assert figures["by_removal"]["delete"]["residue_rate"] == 0.5
    assert figures["by_removal"]["expire_ttl"]["residue_rate"] == 0.0
    assert figures["found"] == [{"canary": "c2", "removal": "delete", "places": ["search"]}]
    assert figures["awaiting_sweep"] == [{"canary": "c3", "places": ["vectors"]}]
    assert residue_figures(runs[:1])["residue_rate"] == 0.0


def test_it_scores_the_decisions_at_risk_replay():
    expected = {("a", "deleted"), ("b", "superseded")}
    assert at_risk_figures(expected, expected)["at_risk_recall"] == 1.0
    half = at_risk_figures(expected, {("a", "deleted"), ("c", "expired")})
    assert (half["at_risk_recall"], half["at_risk_precision"]) == (0.5, 0.5)
    assert half["missed"] == ["b superseded"]
    assert half["unexpected"] == ["c expired"]


def test_a_threshold_fails_on_its_bound_and_when_not_measured():
    results = {
        "record": {"decisions": {"decision_accuracy": 0.9}, "residue": {"residue_rate": 0.0}}
    }
    checks = {
        c.name: c.passed
        for c in thresholds_check(
            results,
            {
                "record.decision_accuracy": {"min": 0.95},
                "record.residue_rate": {"max": 0.0},
                "record.recall_at_k": {"min": 0.5},
            },
        )
    }
    assert checks == {
        "record.decision_accuracy": False,
        "record.residue_rate": True,
        "record.recall_at_k": False,
    }


def test_the_guarantees_hold_whatever_a_scenario_file_says():
    from apps.evaluation.metrics import thresholds_effective

    merged = thresholds_effective(
        {"record.residue_rate": {"max": 0.5}, "record.recall_at_k": {"min": 0.9}}
    )
    assert merged["record.residue_rate"] == {"max": 0.0}
    assert merged["record.wrong_scope_decisions"] == {"max": 0.0}
    assert merged["record.recall_at_k"] == {"min": 0.9}


def test_it_counts_missed_beside_wrong_and_abstained():
    found = scenario(
        [memory("m1", "relevant", "v"), memory("n1", "noise", key="other")], expected="v"
    )
    trap = scenario(
        [memory("m1", "out_of_scope", "w")], expected="default", sid="s2", cls="abstain"
    )
    figures = decision_figures(
        [
            DecisionRun(found, got(found, "n1")),  # the relevant memory was there, not found
            DecisionRun(trap, got(trap, "m1")),  # acted on what must not apply
            DecisionRun(trap, ()),  # nothing: the right answer
        ]
    )
    assert figures["missed_rate"] == pytest.approx(1 / 3)
    assert figures["wrong_rate"] == pytest.approx(1 / 3)
    assert figures["abstention_rate"] == pytest.approx(1 / 3)
    assert figures["by_class"]["abstain"]["missed_rate"] == 0.0


def test_a_redacted_value_is_nothing_to_act_on():
    s = scenario([memory("m1", "redacted", "v")], expected="default")
    redacted = Retrieved(memory="m1", key="k", value="[REDACTED]", observed_at="2025-01-01")
    assert decide(s, (redacted,)) == ("default", None)
    # A memory that kept the value it had before its redaction (a cache's index) is acted on.
    acted = decision_figures([DecisionRun(s, got(s, "m1"))])
    assert acted["redacted_decisions"] == 1
    assert acted["wrong_rate"] == 1.0


def test_it_reports_each_half_on_its_own():
    import dataclasses

    s = scenario([memory("m1", "relevant", "v")], expected="v")
    tuning = dataclasses.replace(s, half="tuning")
    held_out = dataclasses.replace(s, half="held_out", id="s2")
    figures = decision_figures([DecisionRun(tuning, got(tuning, "m1")), DecisionRun(held_out, ())])
    assert figures["by_half"]["tuning"]["decision_accuracy"] == 1.0
    assert figures["by_half"]["held_out"]["decision_accuracy"] == 0.0
    assert figures["by_half"]["held_out"]["by_class"]["c"]["missed_rate"] == 1.0


def test_nothing_made_at_risk_is_nothing_missed():
    assert at_risk_figures(set(), set())["at_risk_recall"] == 1.0
