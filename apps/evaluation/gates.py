"""Intervals over generator seeds, the recorded per-class figures a run must not fall below,
and the targets every run reports.

Pure functions over the figures of :mod:`apps.evaluation.metrics`, so each rule can be checked
on hand-made figures:

* an **interval** is the mean over seeds with a 95 % Student-t half-width (seeds are few);
* a **gate** fails when a class's record accuracy falls below its last recorded mean by more
  than the larger of the recorded and the current half-width, and of one decision's share
  (the recorded figures live in a committed file, ``docs/evaluation/baseline.json``;
  ``evaluate --record-baseline`` rewrites it);
* a **target** is reported in every run; once a recorded run reached it, it is gated too.
  A target the record misses is a product defect to fix, never a bound to lower.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .metrics import dig

BASELINE_FORMAT = "memoryconsole-evaluation-baseline/1"
GATED_FIGURE = "decision_accuracy"
INTERVAL_FIGURES = (
    "decision_accuracy",
    "recall_at_k",
    "recall_precision",
    "missed_rate",
    "wrong_rate",
    "abstention_rate",
)
# Student's t at 97.5 % by degrees of freedom (seeds - 1); 1.96 past the table.
T_975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}
TARGET_MARGIN_OVER_STORE = 0.15
TARGET_MISSED_MAX = 0.05


# The checkout's docs (the recorded figures are reviewed as a diff beside the code).
BASELINE_PATH = Path(__file__).resolve().parents[2] / "docs" / "evaluation" / "baseline.json"


def interval(values: Sequence[float | None]) -> dict[str, Any]:
    """Mean and 95 % half-width of one figure over seeds (``None``: not measured in a seed)."""
    found = [float(v) for v in values if v is not None]
    if not found:
        return {"mean": None, "half_width": None, "n": 0}
    mean = statistics.fmean(found)
    if len(found) < 2:
        return {"mean": mean, "half_width": 0.0, "n": len(found)}
    spread = statistics.stdev(found) / math.sqrt(len(found))
    return {"mean": mean, "half_width": T_975.get(len(found) - 1, 1.96) * spread, "n": len(found)}


def intervals(per_seed: Sequence[dict[str, Any]], configurations: Sequence[str]) -> dict[str, Any]:
    """``{configuration: {half: {"all": {figure: interval}, "by_class": {class: {...}}}}}``
    from each seed's results (their ``decisions`` figures, ``by_half``)."""
    found: dict[str, Any] = {}
    for name in configurations:
        decisions = [dig(r, name, "decisions") or {} for r in per_seed]
        halves = list(dict.fromkeys(h for d in decisions for h in d.get("by_half") or {}))
        sections = {h: [dig(d, "by_half", h) or {} for d in decisions] for h in halves}
        if not halves:
            sections = {"all": decisions}
        found[name] = {}
        for half, figures in sections.items():
            classes = list(dict.fromkeys(c for f in figures for c in f.get("by_class") or {}))
            found[name][half] = {
                "all": {k: interval([f.get(k) for f in figures]) for k in INTERVAL_FIGURES},
                "by_class": {
                    cls: {
                        k: interval([dig(f, "by_class", cls, k) for f in figures])
                        for k in INTERVAL_FIGURES
                    }
                    for cls in classes
                },
            }
    return found


def _mean(found: dict[str, Any], name: str, half: str, figure: str) -> float | None:
    mean = dig(found, name, half, "all", figure, "mean")
    return None if mean is None else float(mean)


def _class_reason(figures: dict[str, Any]) -> str:
    missed = dig(figures, "missed_rate", "mean") or 0.0
    wrong = dig(figures, "wrong_rate", "mean") or 0.0
    if missed >= wrong:
        return f"the memory was not found (missed {100 * missed:.0f} %)"
    return f"acted on a memory that must not apply (wrong {100 * wrong:.0f} %)"


def targets(found: dict[str, Any], reached: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Each target with its value, whether the record meets it, whether it is gated (reached
    by a recorded run), and the classes that fall short with why."""
    half = "held_out" if "held_out" in (found.get("record") or {}) else "all"
    record = _mean(found, "record", half, "decision_accuracy")
    store = _mean(found, "store", half, "decision_accuracy")
    missed = _mean(found, "record", half, "missed_rate")
    by_class = dig(found, "record", half, "by_class") or {}
    store_classes = dig(found, "store", half, "by_class") or {}
    bound = None if store is None else store + TARGET_MARGIN_OVER_STORE
    short = []
    for cls, figures in by_class.items():
        ours = dig(figures, "decision_accuracy", "mean")
        theirs = dig(store_classes, cls, "decision_accuracy", "mean")
        # The classes that pull the headline down: short of the store's figure plus the margin
        # (or of every decision right, where the store is within the margin of it).
        if ours is None or theirs is None:
            continue
        if ours < min(1.0, theirs + TARGET_MARGIN_OVER_STORE) - 1e-9:
            short.append(
                f"{cls}: {100 * ours:.0f} % against the store's {100 * theirs:.0f} %, "
                f"{_class_reason(figures)}"
            )
    missed_by_class = {
        cls: dig(figures, "missed_rate", "mean") for cls, figures in by_class.items()
    }
    results = [
        {
            "name": "record.headline_accuracy_over_store",
            "label": f"{half} accuracy at least the fair store's + "
            f"{100 * TARGET_MARGIN_OVER_STORE:.0f} points",
            "value": record,
            "bound": {"min": bound} if bound is not None else {},
            "met": record is not None and bound is not None and record >= bound - 1e-9,
            "short": short,
        },
        {
            "name": "record.headline_missed_rate",
            "label": f"{half} decisions that missed a relevant memory at most "
            f"{100 * TARGET_MISSED_MAX:.0f} %",
            "value": missed,
            "bound": {"max": TARGET_MISSED_MAX},
            "met": missed is not None and missed <= TARGET_MISSED_MAX + 1e-9,
            "short": [
                f"{cls}: missed {100 * value:.0f} %"
                for cls, value in missed_by_class.items()
                if value is not None and value > TARGET_MISSED_MAX
            ],
        },
    ]
    for target in results:
        target["gated"] = target["name"] in reached
    return results


def baseline_read(path: Path | None = None) -> dict[str, Any] | None:
    target = path or BASELINE_PATH
    try:
        data = json.loads(target.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("format") == BASELINE_FORMAT else None


def baseline_of(
    found: dict[str, Any],
    *,
    embedding_model: str,
    seeds: Sequence[int],
    per_class: int,
    previous: dict[str, Any] | None,
    met: Sequence[str],
) -> dict[str, Any]:
    """The file ``--record-baseline`` writes: the record's per-class figure of each half, and
    the targets reached (once reached, a target stays gated)."""
    record = found.get("record") or {}
    return {
        "format": BASELINE_FORMAT,
        "recorded_at": datetime.now(UTC).replace(microsecond=0).isoformat(),
        "embedding_model": embedding_model,
        "seeds": list(seeds),
        "per_class": per_class,
        "figure": GATED_FIGURE,
        "classes": {
            half: {
                cls: {
                    "mean": round(figures[GATED_FIGURE]["mean"], 4),
                    "half_width": round(figures[GATED_FIGURE]["half_width"], 4),
                }
                for cls, figures in section["by_class"].items()
                if figures[GATED_FIGURE]["mean"] is not None
            }
            for half, section in record.items()
        },
        "targets_reached": sorted(set((previous or {}).get("targets_reached") or []) | set(met)),
    }


def gates_check(
    found: dict[str, Any], baseline: dict[str, Any] | None, *, embedding_model: str
) -> tuple[list[dict[str, Any]], str]:
    """A check per recorded class (shaped as a threshold check), and a note when the gates
    could not apply (no recorded figures, or recorded with another embedding model)."""
    if baseline is None:
        return [], "no recorded figures (docs/evaluation/baseline.json): per-class gates skipped"
    if baseline.get("embedding_model") != embedding_model:
        return [], (
            f"figures recorded with {baseline.get('embedding_model')}, this run used "
            f"{embedding_model}: per-class gates skipped"
        )
    checks = []
    record = found.get("record") or {}
    recorded_decisions = len(baseline.get("seeds") or []) * int(baseline.get("per_class") or 0)
    one_decision = 1 / recorded_decisions if recorded_decisions else 0.0
    for half, classes in (baseline.get("classes") or {}).items():
        for cls, recorded in classes.items():
            current = dig(record, half, "by_class", cls, GATED_FIGURE) or {}
            # Never narrower than one decision of the class over the recorded run: with a few
            # decisions a class, one of them flipping on a similarity at the floor's edge (float
            # arithmetic on another machine) is noise, not a regression.
            tolerance = max(
                float(recorded["half_width"]), float(current.get("half_width") or 0), one_decision
            )
            bound = max(0.0, round(float(recorded["mean"]) - tolerance, 4))
            value = current.get("mean")
            checks.append(
                {
                    "name": f"record.{half}.{cls}.{GATED_FIGURE}",
                    "value": value,
                    "bound": {"min": bound},
                    "passed": value is not None and value >= bound - 1e-9,
                }
            )
    return checks, ""
