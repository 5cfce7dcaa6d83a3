"""The figures of an evaluation, computed from what a memory returned for each decision.

Pure functions over plain data: the runner (:mod:`apps.evaluation.runner`) calls the product's
API (or the cache) and records what came back; everything here only counts, so each figure can
be checked on a hand-made case. Definitions (also in ``docs/evaluation.md``):

* **decision rule**: the agent's stand-in. Among the retrieved memories of the decision's key,
  the one observed last (rank breaks ties); none: the decision's default. Recency is the
  kindest rule for a cache, which has nothing else to tell an old value from a new one.
* **recall precision**: of every memory retrieved for every decision, the share labelled
  relevant to its decision; **recall@k**: of every relevant memory, the share retrieved.
* **returned ... rate**: the share of retrieved memories with that label (deleted,
  out of scope, stale = expired or superseded, provisional before an irreversible decision):
  memories handed to the agent as something to act on that must not be.
* **wrong-scope / stale / provisional-driven irreversible / deleted decisions**: decisions
  whose deciding memory (the one the rule used) has that label.
* **removal sensitivity**: re-run each decision with each retrieved memory removed in turn;
  the share of decisions that change at least once. A changed decision *depends* on the
  removed memory; **unsound dependencies** are dependencies on a memory that must not
  influence the decision (anything but relevant: not confirmed where it must be, or out of
  scope, stale, deleted).
* **missed**: the share of decisions that fell back to the default while a relevant memory
  of the key existed (the memory was not found); **wrong**: the share that acted on a memory
  that must not apply (anything but relevant); **abstained**: the share answered with nothing.
* **stale-entry influence**: re-run each decision with its expired, superseded and
  provisional-before-irreversible memories masked; the share of decisions that change.
* **residue rate**: of the removed canaries, the share whose token is still readable in at
  least one place probed; beside it, found places over probed places.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from apps.records.redaction import REDACTION_MARKER

from .scenarios import (
    DELETED,
    HARMFUL,
    OUT_OF_SCOPE,
    PROVISIONAL,
    REDACTED,
    RELEVANT,
    STALE,
    Scenario,
)


@dataclass(frozen=True)
class Retrieved:
    """One memory a configuration returned for a decision, in rank order.

    ``memory`` is the scenario's id for it, or "" for something the scenario did not write
    (another subject's memory, a summary): never relevant."""

    memory: str
    key: str
    value: Any
    observed_at: str


@dataclass(frozen=True)
class DecisionRun:
    """A decision as one configuration took it."""

    scenario: Scenario
    retrieved: tuple[Retrieved, ...]

    def label_of(self, item: Retrieved) -> str:
        if not item.memory:
            return ""
        found = next((m for m in self.scenario.memories if m.id == item.memory), None)
        return found.label if found else ""


@dataclass(frozen=True)
class CanaryRun:
    """What the probes found of one removed canary: each place probed, and where the token
    was still readable."""

    canary: str
    removal: str
    probed: tuple[str, ...]
    residues: tuple[str, ...]
    # Stored rows of a TTL-expired canary seen before the expiry sweep (not residue: no read
    # returns them, and the sweep removes them).
    awaiting_sweep: tuple[str, ...] = ()


def dig(data: Any, *keys: str) -> Any:
    """``data[k1][k2]...`` of nested figures; None from the first level missing or empty."""
    for key in keys:
        data = data.get(key) if data else None
    return data


def same_value(left: Any, right: Any) -> bool:
    return bool(
        json.dumps(left, sort_keys=True, default=str)
        == json.dumps(right, sort_keys=True, default=str)
    )


def decide(scenario: Scenario, retrieved: Sequence[Retrieved]) -> tuple[Any, Retrieved | None]:
    """The decision rule: the latest observed retrieved memory of the key (the first in rank
    among equals), else the default. Returns the decision and the memory it used. A value
    that reads as redacted is no value to act on: an agent given "[REDACTED]" skips it."""
    chosen: Retrieved | None = None
    for item in retrieved:
        if item.key != scenario.decision.key or item.value == REDACTION_MARKER:
            continue
        if chosen is None or item.observed_at > chosen.observed_at:
            chosen = item
    if chosen is None:
        return scenario.decision.default, None
    return chosen.value, chosen


def _share(part: float, whole: float) -> float | None:
    return part / whole if whole else None


@dataclass
class DecisionFigures:
    decisions: int = 0
    correct: int = 0
    retrieved: int = 0
    relevant_retrieved: int = 0
    relevant: int = 0
    returned: Counter[str] = field(default_factory=Counter)  # harmful label -> retrieved
    deciding: Counter[str] = field(default_factory=Counter)  # harmful label -> decisions
    sensitive: int = 0
    dependencies: int = 0
    unsound_dependencies: int = 0
    stale_changed: int = 0
    missed: int = 0
    wrong: int = 0
    abstained: int = 0

    def as_dict(self) -> dict[str, Any]:
        def returned(*labels: str) -> float:
            return _share(sum(self.returned[label] for label in labels), self.retrieved) or 0.0

        return {
            "decisions": self.decisions,
            "decision_accuracy": _share(self.correct, self.decisions),
            "recall_precision": _share(self.relevant_retrieved, self.retrieved),
            "recall_at_k": _share(self.relevant_retrieved, self.relevant),
            "retrieved": self.retrieved,
            "returned_deleted_rate": returned(DELETED),
            "returned_out_of_scope_rate": returned(OUT_OF_SCOPE),
            "returned_stale_rate": returned(*STALE),
            "returned_provisional_rate": returned(PROVISIONAL),
            "wrong_scope_decisions": self.deciding[OUT_OF_SCOPE],
            "stale_decisions": sum(self.deciding[label] for label in STALE),
            "provisional_irreversible_decisions": self.deciding[PROVISIONAL],
            "deleted_decisions": self.deciding[DELETED],
            "redacted_decisions": self.deciding[REDACTED],
            "missed_rate": _share(self.missed, self.decisions),
            "wrong_rate": _share(self.wrong, self.decisions),
            "abstention_rate": _share(self.abstained, self.decisions),
            "removal_sensitivity": _share(self.sensitive, self.decisions),
            "dependencies": self.dependencies,
            "unsound_dependencies": self.unsound_dependencies,
            "unsound_dependency_rate": _share(self.unsound_dependencies, self.dependencies) or 0.0,
            "stale_influence": _share(self.stale_changed, self.decisions),
        }


def _add_decision(figures: DecisionFigures, run: DecisionRun) -> None:
    scenario = run.scenario
    figures.decisions += 1
    decided, used = decide(scenario, run.retrieved)
    if same_value(decided, scenario.decision.expected):
        figures.correct += 1
    # A memory returned twice (a cache holding duplicates) counts once.
    distinct = list({item.memory or f"?{i}": item for i, item in enumerate(run.retrieved)}.values())
    labels = [run.label_of(item) for item in distinct]
    figures.retrieved += len(distinct)
    figures.relevant_retrieved += labels.count(RELEVANT)
    figures.relevant += sum(1 for m in scenario.memories if m.label == RELEVANT)
    for label in labels:
        if label in HARMFUL:
            figures.returned[label] += 1
    if used is not None:
        label = run.label_of(used)
        if label in HARMFUL:
            figures.deciding[label] += 1
        figures.wrong += int(label != RELEVANT)
    elif any(m.label == RELEVANT and m.key == scenario.decision.key for m in scenario.memories):
        figures.missed += 1
    figures.abstained += int(not run.retrieved)
    changed = False
    for item, label in zip(distinct, labels, strict=True):
        without = [
            r
            for r in run.retrieved
            if r is not item and (not item.memory or r.memory != item.memory)
        ]
        if not same_value(decide(scenario, without)[0], decided):
            changed = True
            figures.dependencies += 1
            if label != RELEVANT:
                figures.unsound_dependencies += 1
    figures.sensitive += int(changed)
    masked = [r for r in run.retrieved if run.label_of(r) not in STALE | {PROVISIONAL}]
    if not same_value(decide(scenario, masked)[0], decided):
        figures.stale_changed += 1


def _figures_of(runs: list[DecisionRun]) -> dict[str, Any]:
    overall = DecisionFigures()
    by_class: dict[str, DecisionFigures] = {}
    for run in runs:
        _add_decision(overall, run)
        _add_decision(by_class.setdefault(run.scenario.cls, DecisionFigures()), run)
    return {
        **overall.as_dict(),
        "by_class": {cls: figures.as_dict() for cls, figures in by_class.items()},
    }


def decision_figures(runs: Iterable[DecisionRun]) -> dict[str, Any]:
    """The decision figures of one configuration: overall and by scenario class, and the same
    for each half of a generated set (``by_half``: ``tuning``, ``held_out``)."""
    runs = list(runs)
    halves = list(dict.fromkeys(run.scenario.half for run in runs if run.scenario.half))
    return {
        **_figures_of(runs),
        "by_half": {
            half: _figures_of([r for r in runs if r.scenario.half == half]) for half in halves
        },
    }


def residue_figures(runs: Iterable[CanaryRun]) -> dict[str, Any]:
    """Residue after removal, overall and by kind of removal, with every residue named."""
    runs = list(runs)

    def figures(selected: list[CanaryRun]) -> dict[str, Any]:
        probed = sum(len(r.probed) for r in selected)
        found = sum(len(r.residues) for r in selected)
        leaking = sum(1 for r in selected if r.residues)
        return {
            "canaries": len(selected),
            "residue_rate": _share(leaking, len(selected)) or 0.0,
            "places_probed": probed,
            "residues": found,
            "residue_place_rate": _share(found, probed) or 0.0,
        }

    removals = list(dict.fromkeys(r.removal for r in runs))
    return {
        **figures(runs),
        "by_removal": {kind: figures([r for r in runs if r.removal == kind]) for kind in removals},
        "found": [
            {"canary": r.canary, "removal": r.removal, "places": list(r.residues)}
            for r in runs
            if r.residues
        ],
        "awaiting_sweep": [
            {"canary": r.canary, "places": list(r.awaiting_sweep)} for r in runs if r.awaiting_sweep
        ],
    }


def at_risk_figures(expected: set[tuple[str, str]], found: set[tuple[str, str]]) -> dict[str, Any]:
    """Decisions at risk replayed against the changes the scenarios made after their
    decisions: pairs of (memory, change). Recall: expected pairs found; precision: found
    pairs expected."""
    hit = expected & found
    return {
        "expected": len(expected),
        "found": len(found),
        # Nothing made at risk (no changed memory had been returned): nothing to miss.
        "at_risk_recall": _share(len(hit), len(expected)) if expected else 1.0,
        "at_risk_precision": _share(len(hit), len(found))
        if found
        else (1.0 if not expected else 0.0),
        "missed": sorted(f"{m} {c}" for m, c in expected - found),
        "unexpected": sorted(f"{m} {c}" for m, c in found - expected),
    }


# What the record configuration guarantees on any scenario set: checked even when a set's
# file names no threshold (a file may name the same figure to state it again, not to relax
# it: a weaker bound than these is refused by thresholds_effective).
GUARANTEES: dict[str, dict[str, float]] = {
    "record.residue_rate": {"max": 0.0},
    "record.wrong_scope_decisions": {"max": 0.0},
    "record.stale_decisions": {"max": 0.0},
    "record.provisional_irreversible_decisions": {"max": 0.0},
    "record.deleted_decisions": {"max": 0.0},
    "record.redacted_decisions": {"max": 0.0},
}


def thresholds_effective(thresholds: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """A set's thresholds with the guarantees always among them, never loosened."""
    merged = {**thresholds}
    for name, bound in GUARANTEES.items():
        merged[name] = {**merged.get(name, {}), **bound}
    return merged


@dataclass(frozen=True)
class ThresholdCheck:
    name: str
    value: float | None
    bound: dict[str, float]
    passed: bool


def figure_at(results: dict[str, Any], name: str) -> float | None:
    """A figure by its dotted name, e.g. ``record.residue_rate``: a configuration's decision,
    residue or at-risk figure."""
    configuration, _, figure = name.partition(".")
    section = results.get(configuration) or {}
    for part in ("decisions", "residue", "at_risk"):
        value = (section.get(part) or {}).get(figure)
        if value is not None:
            return float(value)
    return None


def thresholds_check(
    results: dict[str, Any], thresholds: dict[str, dict[str, float]]
) -> list[ThresholdCheck]:
    """Each threshold with its figure; a missing figure fails (it was not measured)."""
    checks = []
    for name, bound in thresholds.items():
        value = figure_at(results, name)
        passed = value is not None
        if value is not None and "min" in bound:
            passed = passed and value >= bound["min"]
        if value is not None and "max" in bound:
            passed = passed and value <= bound["max"]
        checks.append(ThresholdCheck(name, value, bound, passed))
    return checks
