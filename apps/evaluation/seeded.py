"""The generated evaluation: one scenario set per generator seed, each in a sandbox of its own,
figures pooled over the seeds and each with its interval; the guarantees, the per-class gates
and the targets checked on the whole.

The first seed's set also holds the residue canaries, the decisions changed afterwards
(decisions at risk) and the relevance-floor sweep: those check guarantees or draw one curve,
and need no interval.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .gates import baseline_read, gates_check, intervals, targets
from .metrics import DecisionRun, decision_figures, thresholds_check, thresholds_effective
from .runner import BASELINES, RecordSettings, evaluate
from .sandbox import ProgressCallback, TenantPolicy
from .scenarios import scenarios_parse
from .scenarios.generate import CLASSES, DEFAULT_PER_CLASS, DEFAULT_SEED, THRESHOLDS, build, render

DEFAULT_SEEDS = 5
STEPS_PER_SEED = 1000  # the progress of one seed, scaled into the whole run's


def seeds_from(count: int, first: int = DEFAULT_SEED) -> list[int]:
    return list(range(first, first + count))


def evaluate_generated(
    *,
    seeds: Sequence[int],
    per_class: int = DEFAULT_PER_CLASS,
    against: tuple[str, ...] = BASELINES,
    settings: RecordSettings | None = None,
    policy: TenantPolicy | None = None,
    progress: ProgressCallback | None = None,
    baseline: Path | None = None,
    probes: bool = True,
) -> dict[str, Any]:
    """Run a generated set per seed; pooled figures, intervals, checks. Without ``probes``,
    the first seed's set has no canaries, later changes or floor sweep either (a quicker
    look at the decisions alone; its residue and at-risk figures are then not measured)."""
    started = time.monotonic()
    policy = policy or TenantPolicy.default()
    configurations = ["record", *(name for name in BASELINES if name in against)]
    per_seed: list[dict[str, Any]] = []
    pooled: dict[str, list[DecisionRun]] = {name: [] for name in configurations}
    digests: list[str] = []
    first: dict[str, Any] = {}
    decisions = 0
    for position, seed in enumerate(seeds):
        data = build(seed, per_class=per_class, canaries=probes and position == 0)
        scenario_set = scenarios_parse(render(data).encode(), source=f"generated seed {seed}")
        digests.append(scenario_set.digest)
        decisions += len(scenario_set.scenarios)

        def report(phase: str, done: int, total: int, *, at: int = position) -> None:
            if progress is not None:
                share = done / total if total else 1.0
                progress(
                    f"seed {at + 1}/{len(seeds)}: {phase}",
                    at * STEPS_PER_SEED + int(STEPS_PER_SEED * share),
                    len(seeds) * STEPS_PER_SEED,
                )

        found = evaluate(
            scenario_set,
            policy=policy,
            against=tuple(against),
            settings=settings,
            sweep=probes and position == 0,
            progress=report,
            keep_runs=True,
        )
        runs = found.pop("_runs")
        for name in configurations:
            pooled[name] += runs.get(name, [])
        if position == 0:
            first = found
        per_seed.append(found)

    summary = intervals(per_seed, configurations)
    recorded = baseline_read(baseline)
    reached = (recorded or {}).get("targets_reached") or []
    found_targets = targets(summary, reached)
    results: dict[str, Any] = {
        "scenario_set": {
            "name": "generated",
            "source": "apps/evaluation/scenarios/generate.py",
            "digest": hashlib.sha256("".join(digests).encode()).hexdigest(),
            "seeds": list(seeds),
            "per_class": per_class,
            "decisions": decisions,
            "canaries": first["scenario_set"]["canaries"],
            "classes": list(CLASSES),
        },
        "embedding_model": policy.embedding_model,
        "note": policy.note,
        "record": {
            "decisions": decision_figures(pooled["record"]),
            "residue": first["record"]["residue"],
            "at_risk": first["record"]["at_risk"],
            "floor_sweep": first["record"].get("floor_sweep", []),
        },
        "intervals": summary,
        "per_seed": [
            {
                "seed": seed,
                "passed": found["passed"],
                "seconds": found["seconds"],
                "phase_seconds": found["phase_seconds"],
                "failed": [t["name"] for t in found["thresholds"] if not t["passed"]],
            }
            for seed, found in zip(seeds, per_seed, strict=True)
        ],
        "targets": found_targets,
    }
    if settings is not None and settings != RecordSettings():
        results["record"]["settings"] = first["record"].get("settings")
    if "store" in configurations:
        results["store"] = {"decisions": decision_figures(pooled["store"])}
    if "cache" in configurations:
        results["cache"] = {
            "decisions": decision_figures(pooled["cache"]),
            "residue": first["cache"]["residue"],
        }
    # The guarantees on every decision of every seed (the pooled counts), residue and
    # decisions at risk on the first seed's canaries and changes.
    checks = [
        dataclasses.asdict(c)
        for c in thresholds_check(results, thresholds_effective(_thresholds()))
    ]
    gated, note = gates_check(summary, recorded, embedding_model=policy.embedding_model)
    checks += gated
    checks += [
        {"name": t["name"], "value": t["value"], "bound": t["bound"], "passed": t["met"]}
        for t in found_targets
        if t["gated"]
    ]
    results["gates_note"] = note
    results["thresholds"] = checks
    results["passed"] = all(c["passed"] for c in checks)
    results["seconds"] = round(time.monotonic() - started, 1)
    return results


def _thresholds() -> dict[str, dict[str, float]]:
    return {name: {k: float(v) for k, v in bound.items()} for name, bound in THRESHOLDS.items()}
