"""A small slice of the shipped scenario set: every class, every later change and every kind
of removal once, so an end-to-end run takes seconds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from apps.evaluation.scenarios import DEFAULT_PATH


def small_set_data() -> dict[str, Any]:
    data = json.loads(DEFAULT_PATH.read_text(encoding="utf-8"))
    decisions, classes, changes = [], set(), set()
    for decision in data["decisions"]:
        change = (decision.get("after") or {}).get("change")
        new_class = decision["class"] not in classes
        fate = next((m.get("fate") for m in decision["memories"] if m.get("fate")), None)
        new_fate = fate is not None and (decision["class"], fate) not in classes
        # One later change is enough here: test_api lists every kind, the full run all ten.
        if new_class or new_fate or (change and not changes - {None}):
            decisions.append(decision)
            classes.update({decision["class"], (decision["class"], fate)})
            changes.add(change)
    canaries, removals = [], set()
    for canary in data["canaries"]:
        if canary["removal"] not in removals:
            canaries.append(canary)
            removals.add(canary["removal"])
    return {**data, "name": "small", "decisions": decisions, "canaries": canaries}


@pytest.fixture
def writer(tenant: Any) -> Any:
    from .support import writer_agent

    return writer_agent(tenant)


@pytest.fixture(scope="session")
def small_set_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("scenarios") / "small.json"
    path.write_text(json.dumps(small_set_data()), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def tiny_set_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two decisions and one canary: enough for a command's whole path, in a few seconds."""
    data = small_set_data()
    changed = next(d for d in data["decisions"] if d.get("after"))
    data = {
        **data,
        "name": "tiny",
        # One decision changed afterwards, so the decisions-at-risk figures are measured.
        "decisions": [changed, next(d for d in data["decisions"] if d is not changed)],
        "canaries": data["canaries"][:1],
    }
    path = tmp_path_factory.mktemp("scenarios") / "tiny.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def fake_results(*, passed: bool = True) -> dict[str, Any]:
    """Figures shaped as a run stores them, from hand-made decisions (no sandbox)."""
    from apps.evaluation.metrics import CanaryRun, DecisionRun, decision_figures, residue_figures

    from .factories import got, memory, scenario

    s = scenario(
        [memory("m1", "relevant", "v"), memory("m2", "out_of_scope", "w", at="2025-02")],
        expected="v",
    )
    return {
        "scenario_set": {
            "name": "default",
            "source": "default",
            "digest": "d" * 64,
            "decisions": 1,
            "canaries": 1,
            "classes": ["c"],
        },
        "embedding_model": "hashing-256",
        "note": "",
        "record": {
            "decisions": decision_figures([DecisionRun(s, got(s, "m1"))]),
            "residue": residue_figures([CanaryRun("c1", "delete", ("record",), ())]),
            "at_risk": {},
        },
        "cache": {
            "decisions": decision_figures([DecisionRun(s, got(s, "m1", "m2"))]),
            "residue": residue_figures([CanaryRun("c1", "delete", ("record",), ("record",))]),
        },
        "seconds": 1.0,
        "thresholds": [
            {"name": "record.residue_rate", "value": 0.0, "bound": {"max": 0.0}, "passed": passed}
        ],
        "passed": passed,
    }
