"""Intervals over seeds, the per-class gates against recorded figures, and the targets."""

from __future__ import annotations

import pytest

from apps.evaluation.gates import baseline_of, gates_check, interval, intervals, targets


def _seed(record: dict[str, float], store: dict[str, float], missed: float = 0.0) -> dict:
    """One seed's results: the held-out half's per-class accuracy of record and store."""

    def half(accuracy: dict[str, float], missed_rate: float) -> dict:
        by_class = {
            cls: {"decision_accuracy": value, "missed_rate": missed_rate, "wrong_rate": 0.0}
            for cls, value in accuracy.items()
        }
        overall = sum(accuracy.values()) / len(accuracy)
        return {"decision_accuracy": overall, "missed_rate": missed_rate, "by_class": by_class}

    return {
        "record": {"decisions": {"by_half": {"held_out": half(record, missed)}}},
        "store": {"decisions": {"by_half": {"held_out": half(store, 0.0)}}},
    }


def test_an_interval_is_the_mean_with_a_student_t_half_width():
    assert interval([0.5, 0.5, 0.5]) == {"mean": 0.5, "half_width": 0.0, "n": 3}
    found = interval([0.0, 1.0, None])
    assert found["mean"] == 0.5
    assert found["n"] == 2
    assert found["half_width"] == pytest.approx(12.706 * 0.5)
    assert interval([None])["mean"] is None


def test_a_class_below_its_recorded_figure_by_more_than_its_interval_fails():
    recorded_run = intervals([_seed({"paraphrase": 0.8}, {"paraphrase": 0.5})] * 3, ["record"])
    baseline = baseline_of(
        recorded_run,
        embedding_model="e5-small",
        seeds=[1, 2, 3],
        per_class=3,
        previous=None,
        met=[],
    )
    assert baseline["classes"]["held_out"]["paraphrase"] == {"mean": 0.8, "half_width": 0.0}
    same = intervals([_seed({"paraphrase": 0.8}, {"paraphrase": 0.5})] * 3, ["record"])
    worse = intervals([_seed({"paraphrase": 0.6}, {"paraphrase": 0.5})] * 3, ["record"])
    # Within the interval: seeds that vary as much as the drop.
    noisy = intervals(
        [_seed({"paraphrase": v}, {"paraphrase": 0.5}) for v in (0.5, 0.9, 0.4, 1.0)], ["record"]
    )
    assert [c["passed"] for c in gates_check(same, baseline, embedding_model="e5-small")[0]] == [
        True
    ]
    failed = gates_check(worse, baseline, embedding_model="e5-small")[0]
    assert failed[0]["name"] == "record.held_out.paraphrase.decision_accuracy"
    assert failed[0]["passed"] is False
    assert gates_check(noisy, baseline, embedding_model="e5-small")[0][0]["passed"] is True
    # One decision of the class's nine flipping is within noise, whatever the interval.
    one_less = intervals([_seed({"paraphrase": 0.7}, {"paraphrase": 0.5})] * 3, ["record"])
    assert gates_check(one_less, baseline, embedding_model="e5-small")[0][0]["passed"] is True
    checks, note = gates_check(worse, baseline, embedding_model="hashing-256")
    assert checks == []
    assert "hashing-256" in note


def test_targets_are_reported_with_the_classes_short_of_them_and_gated_once_reached():
    found = intervals(
        [
            _seed(
                {"paraphrase": 0.6, "wrong_scope": 1.0},
                {"paraphrase": 0.9, "wrong_scope": 0.5},
                missed=0.2,
            )
        ]
        * 2,
        ["record", "store"],
    )
    over_store, missed = targets(found)
    assert over_store["met"] is False
    assert over_store["gated"] is False
    assert over_store["value"] == pytest.approx(0.8)
    assert over_store["bound"] == {"min": pytest.approx(0.7 + 0.15)}
    assert [line.split(":")[0] for line in over_store["short"]] == ["paraphrase"]
    assert "not found" in over_store["short"][0]
    assert missed["met"] is False
    assert missed["short"]
    assert targets(found, reached=["record.headline_missed_rate"])[1]["gated"] is True
    baseline = baseline_of(
        found,
        embedding_model="m",
        seeds=[1],
        per_class=1,
        previous={"targets_reached": ["record.headline_missed_rate"]},
        met=[],
    )
    # Once reached, a target stays gated: a later recording never drops it.
    assert baseline["targets_reached"] == ["record.headline_missed_rate"]
