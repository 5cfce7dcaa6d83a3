"""An evaluation's figures as a terminal table, an HTML report and SVG charts.

The charts are drawn here as SVG (no plotting library): horizontal grouped bars, one colour
per configuration, each bar labelled with its value as text, so the charts need no script,
print and read the same in a terminal's HTML viewer, a browser and the README; the console
shows the same SVG beside tables of the same figures.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from typing import Any

from django.template.loader import render_to_string

from .metrics import dig

# (figure, label, how to show it, which way is better)
DECISION_FIGURES: tuple[tuple[str, str, str, str], ...] = (
    ("decisions", "decisions", "count", ""),
    ("decision_accuracy", "decisions as the labels call for", "share", "high"),
    ("recall_precision", "recall precision (retrieved that is relevant)", "share", "high"),
    ("recall_at_k", "recall@k (relevant that is retrieved)", "share", "high"),
    ("wrong_scope_decisions", "wrong-scope applications", "count", "low"),
    ("stale_decisions", "stale decisions (expired or superseded memory)", "count", "low"),
    (
        "provisional_irreversible_decisions",
        "provisional-driven irreversible decisions",
        "count",
        "low",
    ),
    ("deleted_decisions", "decisions on a deleted memory", "count", "low"),
    ("redacted_decisions", "decisions on a redacted value", "count", "low"),
    ("missed_rate", "missed: default taken while a relevant memory existed", "share", "low"),
    ("wrong_rate", "wrong: acted on a memory that must not apply", "share", "low"),
    ("abstention_rate", "answered with nothing", "share", ""),
    ("returned_out_of_scope_rate", "returned out of scope", "share", "low"),
    ("returned_stale_rate", "returned stale", "share", "low"),
    (
        "returned_provisional_rate",
        "returned provisional before an irreversible decision",
        "share",
        "low",
    ),
    ("returned_deleted_rate", "returned deleted", "share", "low"),
    (
        "removal_sensitivity",
        "decisions that change when one retrieved memory is removed",
        "share",
        "",
    ),
    ("unsound_dependency_rate", "dependencies on a memory that must not count", "share", "low"),
    (
        "stale_influence",
        "decisions changed by masking stale and provisional memories",
        "share",
        "low",
    ),
)
RESIDUE_FIGURES: tuple[tuple[str, str, str, str], ...] = (
    ("canaries", "canaries removed", "count", ""),
    ("residue_rate", "residue after removal (canaries still readable)", "share", "low"),
    ("residue_place_rate", "residue by place (found / probed)", "share", "low"),
)
AT_RISK_FIGURES: tuple[tuple[str, str, str, str], ...] = (
    ("at_risk_recall", "decisions at risk found (of those made at risk)", "share", "high"),
    ("at_risk_precision", "decisions at risk listed that were at risk", "share", "high"),
)
SERIES = (
    ("record", "record (this product)", "#1f6f5c"),
    ("store", "store (LangGraph-shaped)", "#3b5b9a"),
    ("cache", "cache (nearest neighbours)", "#b4541a"),
)


def shown(value: Any, kind: str) -> str:
    if value is None:
        return "n/a"
    if kind == "share":
        return f"{100 * float(value):.1f} %"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.2f}"
    return str(int(value))


@dataclass(frozen=True)
class Row:
    label: str
    record: str
    cache: str | None
    better: str  # "record", "cache" or "" (against the cache)
    store: str | None = None


def rows(results: dict[str, Any]) -> list[Row]:
    """The side-by-side table: each figure for the record and (when run) the cache."""
    found = []
    sections = (
        ("decisions", DECISION_FIGURES),
        ("residue", RESIDUE_FIGURES),
        ("at_risk", AT_RISK_FIGURES),
    )
    with_cache = "cache" in results
    with_store = "store" in results
    for section, figures in sections:
        record, cache, store = (
            dig(results, name, section) or {} for name in ("record", "cache", "store")
        )
        if not record:
            continue
        for name, label, kind, direction in figures:
            ours, theirs = record.get(name), cache.get(name) if with_cache else None
            better = ""
            if direction and ours is not None and theirs is not None and ours != theirs:
                record_wins = (ours > theirs) == (direction == "high")
                better = "record" if record_wins else "cache"
            found.append(
                Row(
                    label=label,
                    record=shown(ours, kind),
                    cache=shown(theirs, kind) if with_cache and section != "at_risk" else None,
                    better=better,
                    store=shown(store.get(name), kind) if with_store and store else None,
                )
            )
    return found


def text_table(results: dict[str, Any]) -> str:
    """The figures and the thresholds, for a terminal."""
    table = rows(results)
    columns = ["record", *(name for name in ("store", "cache") if name in results)]
    width = max(len(r.label) for r in table) if table else 10
    head = f"{'':<{width}}" + "".join(f"  {name:>10}" for name in columns)
    title = "pooled over every seed's decisions" if results.get("intervals") else ""
    lines = [title, head, "-" * len(head)] if title else [head, "-" * len(head)]
    for row in table:
        cells = "".join(f"  {getattr(row, name) or '':>10}" for name in columns)
        lines.append(f"{row.label:<{width}}" + cells)
    lines.append("")
    if results.get("intervals"):
        lines += interval_lines(results)
        lines.append("")
    for check in results.get("thresholds", []):
        bound = " and ".join(
            f"{'>=' if k == 'min' else '<='} {v:g}" for k, v in sorted(check["bound"].items())
        )
        value = "not measured" if check["value"] is None else f"{check['value']:.4g}"
        mark = "pass" if check["passed"] else "FAIL"
        lines.append(f"{mark}  {check['name']} = {value} (threshold {bound})")
    for item in dig(results, "record", "residue", "found") or []:
        lines.append(
            f"residue: {item['canary']} ({item['removal']}) in {', '.join(item['places'])}"
        )
    at_risk = dig(results, "record", "at_risk") or {}
    for missed in at_risk.get("missed", []):
        lines.append(f"decision at risk not listed: {missed}")
    for unexpected in at_risk.get("unexpected", []):
        lines.append(f"listed as at risk without reason: {unexpected}")
    if results.get("tenant"):
        lines.append(
            f"tenant {results['tenant']['slug']}: {results['tenant']['decisions_at_risk']} "
            "past decisions at risk (GET /api/v1/evaluation/decisions-at-risk)"
        )
    if results.get("gates_note"):
        lines.append(f"note: {results['gates_note']}")
    if results.get("note"):
        lines.append(f"note: {results['note']}")
    lines.append("PASSED" if results.get("passed") else "FAILED")
    return "\n".join(lines)


def _interval_text(figure: dict[str, Any] | None) -> str:
    if not figure or figure.get("mean") is None:
        return "n/a"
    return f"{100 * figure['mean']:.0f} ± {100 * (figure.get('half_width') or 0):.0f}"


HALF_TITLES = {
    "held_out": "held-out half (the headline)",
    "tuning": "tuning half (thresholds and tuning look only here)",
    "all": "all decisions",
}
# Shorter, for a chart's title line (beside its note).
CHART_HALF_TITLES = {**HALF_TITLES, "tuning": "tuning half"}


def interval_lines(results: dict[str, Any]) -> list[str]:
    """Per half and class: accuracy of each configuration with its 95 % interval over seeds,
    and the record's recall@k, missed and wrong; then the targets and the floor sweep."""
    found = results["intervals"]
    configurations = _configurations(found)
    seeds = dig(results, "scenario_set", "seeds") or []
    lines = [
        f"per class, mean ± 95 % interval over {len(seeds)} seeds, in % "
        "(accuracy of each configuration; the record's recall@k, missed, wrong)"
    ]
    for half in found.get("record", {}):
        lines.append("")
        lines.append(HALF_TITLES.get(half, half))
        head = f"{'class':<16}" + "".join(f"{name:>11}" for name in configurations)
        head += f"{'recall@k':>11}{'missed':>11}{'wrong':>11}"
        lines += [head, "-" * len(head)]
        record = found["record"][half]
        for cls in [*record["by_class"], "all"]:
            cells = []
            for name in configurations:
                section = dig(found, name, half) or {}
                figures = section.get("all") if cls == "all" else section["by_class"].get(cls)
                cells.append(_interval_text(dig(figures, "decision_accuracy")))
            ours = record["all"] if cls == "all" else record["by_class"][cls]
            cells += [
                _interval_text(ours.get(k)) for k in ("recall_at_k", "missed_rate", "wrong_rate")
            ]
            lines.append(f"{cls:<16}" + "".join(f"{c:>11}" for c in cells))
    for target in results.get("targets") or []:
        value = "not measured" if target["value"] is None else f"{100 * target['value']:.1f} %"
        bound = " and ".join(
            f"{'>=' if k == 'min' else '<='} {100 * v:.1f} %" for k, v in target["bound"].items()
        )
        state = "met" if target["met"] else "MISSED"
        gated = "gated" if target["gated"] else "reported (gated once a recorded run meets it)"
        lines.append("")
        lines.append(f"target {state}: {target['label']}: {value} ({bound}; {gated})")
        lines += [f"  short: {item}" for item in target["short"]]
    sweep = dig(results, "record", "floor_sweep") or []
    if sweep:
        lines.append("")
        lines.append("relevance floor sweep (record, held-out half of the first seed):")
        lines.append(f"{'floor':>7}{'precision':>11}{'abstained':>11}{'accuracy':>11}{'missed':>9}")
        columns = (("recall_precision", 11), ("abstention_rate", 11), ("decision_accuracy", 11))
        for point in sweep:
            cells = [f"{shown(point[k], 'share'):>{w}}" for k, w in (*columns, ("missed_rate", 9))]
            lines.append(f"{point['floor']:>7.3f}" + "".join(cells))
    return lines


# --- charts -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Group:
    label: str
    values: tuple[tuple[str, float | None], ...]  # (series, value 0..1) per configuration
    errors: tuple[tuple[str, float], ...] = ()  # (series, 95 % half-width), drawn as whiskers


def grouped_bars(title: str, groups: list[Group], *, chart_id: str, note: str = "") -> str:
    """A horizontal grouped bar chart of shares (0 to 1), as standalone SVG markup."""
    label_width, bar_area, value_room = 300, 320, 110
    bar, gap, group_gap, top = 16, 3, 14, 46
    series = [s for s in SERIES if any(name == s[0] for g in groups for name, _ in g.values)]
    per_group = len(series) * (bar + gap) - gap
    height = top + len(groups) * (per_group + group_gap) + 10
    width = label_width + bar_area + value_room
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" '
        f'aria-labelledby="{chart_id}-title {chart_id}-desc" class="evaluation-chart" '
        'font-family="system-ui, sans-serif" font-size="12">',
        f'<title id="{chart_id}-title">{escape(title)}</title>',
    ]
    described = "; ".join(
        f"{g.label}: " + ", ".join(f"{name} {shown(value, 'share')}" for name, value in g.values)
        for g in groups
    )
    parts.append(f'<desc id="{chart_id}-desc">{escape(described)}</desc>')
    parts.append(f'<rect width="{width}" height="{height}" fill="#ffffff"></rect>')
    parts.append(
        f'<text x="0" y="16" font-size="14" font-weight="600" fill="#1a1a1a">{escape(title)}</text>'
    )
    x = 0
    for _name, label, colour in series:
        parts.append(f'<rect x="{x}" y="26" width="12" height="12" fill="{colour}"></rect>')
        parts.append(f'<text x="{x + 16}" y="36" fill="#1a1a1a">{escape(label)}</text>')
        x += 16 + 8 * len(label) + 20
    if note:
        parts.append(
            f'<text x="{width - 4}" y="16" text-anchor="end" fill="#555555">{escape(note)}</text>'
        )
    y = top
    for group in groups:
        parts.append(
            f'<text x="{label_width - 8}" y="{y + per_group / 2 + 4:.0f}" text-anchor="end" '
            f'fill="#1a1a1a">{escape(group.label)}</text>'
        )
        values = dict(group.values)
        for index, (name, _label, colour) in enumerate(series):
            value = values.get(name)
            top_y = y + index * (bar + gap)
            parts.append(
                f'<rect x="{label_width}" y="{top_y}" width="{bar_area}" height="{bar}" '
                'fill="#eeeeee"></rect>'
            )
            length = round(bar_area * max(0.0, min(1.0, value or 0.0)))
            if length:
                parts.append(
                    f'<rect x="{label_width}" y="{top_y}" width="{length}" height="{bar}" '
                    f'fill="{colour}"></rect>'
                )
            error = dict(group.errors).get(name)
            text_x = label_width + length + 6
            if error and value is not None:
                low = label_width + round(bar_area * max(0.0, value - error))
                high = label_width + round(bar_area * min(1.0, value + error))
                middle = top_y + bar / 2
                parts.append(
                    f'<path d="M{low} {middle}H{high}M{low} {top_y + 3}V{top_y + bar - 3}'
                    f'M{high} {top_y + 3}V{top_y + bar - 3}" stroke="#1a1a1a" '
                    'stroke-width="1.5" fill="none"></path>'
                )
                text_x = max(text_x, high + 6)
            label_text = shown(value, "share") + (
                f" ± {100 * error:.0f}" if error and value is not None else ""
            )
            parts.append(
                f'<text x="{text_x}" y="{top_y + bar - 4}" fill="#1a1a1a">'
                f"{escape(label_text)}</text>"
            )
        y += per_group + group_gap
    parts.append("</svg>")
    return "".join(parts)


def _configurations(results: dict[str, Any]) -> list[str]:
    return [name for name, _label, _colour in SERIES if name in results]


def comparison_chart(results: dict[str, Any], *, chart_id: str = "chart-comparison") -> str:
    """Record beside cache: how often each configuration hands over what must not count."""
    configurations = _configurations(results)

    def decision(name: str, figure: str) -> float | None:
        figures = dig(results, name, "decisions") or {}
        value, decisions = figures.get(figure), figures.get("decisions") or 0
        if value is None:
            return None
        # Counts of decisions are shown as shares of all decisions, to share one axis.
        return (
            float(value) / decisions
            if figure.endswith("_decisions") and decisions
            else float(value)
        )

    groups = [
        Group(label, tuple((name, decision(name, figure)) for name in configurations))
        for figure, label in (
            ("decision_accuracy", "decisions as labelled (higher is better)"),
            ("wrong_scope_decisions", "wrong-scope applications"),
            ("stale_decisions", "stale decisions"),
            ("provisional_irreversible_decisions", "provisional-driven irreversible"),
            ("deleted_decisions", "decisions on deleted memory"),
            ("stale_influence", "changed by masking stale entries"),
        )
    ]
    residue = tuple((n, _float(dig(results, n, "residue", "residue_rate"))) for n in configurations)
    groups.append(Group("residue after deletion", residue))
    decisions = dig(results, "record", "decisions", "decisions")
    return grouped_bars(
        "Record beside a cache: share of decisions (residue: of canaries)",
        groups,
        chart_id=chart_id,
        note=f"{decisions} decisions" if decisions else "",
    )


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def _groups_chart(
    results: dict[str, Any], path: tuple[str, str], figure: str, title: str, chart_id: str
) -> str:
    """One figure of each group under ``path`` (the record's classes, its kinds of removal),
    per configuration."""
    configurations = _configurations(results)
    groups = [
        Group(
            group.replace("_", " "),
            tuple((n, _float(dig(results, n, *path, group, figure))) for n in configurations),
        )
        for group in dig(results, "record", *path) or {}
    ]
    return grouped_bars(title, groups, chart_id=chart_id)


def class_chart(results: dict[str, Any], *, half: str = "", chart_id: str = "chart-classes") -> str:
    """Decision accuracy per class of one half, each configuration with its interval."""
    found = results.get("intervals") or {}
    half = half or ("held_out" if "held_out" in (found.get("record") or {}) else "all")
    record = dig(found, "record", half) or {"by_class": {}}
    groups = []
    for cls in [*record["by_class"], "all"]:
        values, errors = [], []
        for name in _configurations(found):
            path = ("all",) if cls == "all" else ("by_class", cls)
            figure = dig(found, name, half, *path, "decision_accuracy") or {}
            values.append((name, figure.get("mean")))
            errors.append((name, float(figure.get("half_width") or 0.0)))
        groups.append(
            Group(
                "all classes" if cls == "all" else cls.replace("_", " "),
                tuple(values),
                tuple(errors),
            )
        )
    seeds = len(dig(results, "scenario_set", "seeds") or [])
    return grouped_bars(
        f"Decisions as labelled, {CHART_HALF_TITLES.get(half, half)}",
        groups,
        chart_id=chart_id,
        note=f"mean and 95 % interval over {seeds} seeds",
    )


def sweep_chart(results: dict[str, Any], *, chart_id: str = "chart-sweep") -> str:
    """The relevance floor swept: precision and accuracy (y) against abstention (x)."""
    points = dig(results, "record", "floor_sweep") or []
    width, height, left, top, plot_w, plot_h = 640, 360, 60, 40, 520, 260
    lines_of = (
        ("recall_precision", "precision", "#1f6f5c"),
        ("decision_accuracy", "accuracy", "#3b5b9a"),
    )

    def x(value: float) -> float:
        return left + plot_w * value

    def y(value: float) -> float:
        return top + plot_h * (1 - value)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-labelledby="{chart_id}-title" '
        'class="evaluation-chart" font-family="system-ui, sans-serif" font-size="12">',
        f'<title id="{chart_id}-title">Relevance floor: precision and accuracy against '
        "abstention (record, held-out half)</title>",
        f'<rect width="{width}" height="{height}" fill="#ffffff"></rect>',
        '<text x="0" y="16" font-size="14" font-weight="600" fill="#1a1a1a">'
        "Relevance floor: precision and accuracy against abstention</text>",
        f'<path d="M{left} {top}V{top + plot_h}H{left + plot_w}" stroke="#555" fill="none"></path>',
        f'<text x="{left + plot_w / 2}" y="{height - 8}" text-anchor="middle" fill="#1a1a1a">'
        "share of decisions answered with nothing</text>",
    ]
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        parts.append(
            f'<text x="{left - 6}" y="{y(tick) + 4:.0f}" text-anchor="end" fill="#555">'
            f"{100 * tick:.0f} %</text>"
        )
        parts.append(
            f'<text x="{x(tick):.0f}" y="{top + plot_h + 16}" text-anchor="middle" fill="#555">'
            f"{100 * tick:.0f} %</text>"
        )
    legend_x = left + 10
    for figure, label, colour in lines_of:
        usable = [
            p for p in points if p.get(figure) is not None and p.get("abstention_rate") is not None
        ]
        if usable:
            path = "M" + "L".join(
                f"{x(p['abstention_rate']):.1f} {y(p[figure]):.1f}" for p in usable
            )
            parts.append(f'<path d="{path}" stroke="{colour}" stroke-width="2" fill="none"></path>')
        for p in usable:
            parts.append(
                f'<circle cx="{x(p["abstention_rate"]):.1f}" cy="{y(p[figure]):.1f}" r="3.5" '
                f'fill="{colour}"><title>floor {p["floor"]}: {label} '
                f"{shown(p[figure], 'share')}, abstained {shown(p['abstention_rate'], 'share')}"
                "</title></circle>"
            )

        if figure == "recall_precision":
            # One label per place: floors that give the same figures share it.
            places: dict[tuple[int, int], list[str]] = {}
            for p in usable:
                at = (round(x(p["abstention_rate"])), round(y(p[figure]) / 8))
                places.setdefault(at, []).append(f"{p['floor']:g}")
            for (px, py), floors in places.items():
                parts.append(
                    f'<text x="{px + 5}" y="{py * 8 - 6}" fill="#555" font-size="10">'
                    f"floor {', '.join(floors)}</text>"
                )
        parts.append(f'<rect x="{legend_x}" y="24" width="12" height="12" fill="{colour}"></rect>')
        parts.append(f'<text x="{legend_x + 16}" y="34" fill="#1a1a1a">{label}</text>')
        legend_x += 110
    parts.append("</svg>")
    return "".join(parts)


def charts(results: dict[str, Any]) -> dict[str, str]:
    drawn = {
        "comparison": comparison_chart(results),
        "precision": _groups_chart(
            results,
            ("decisions", "by_class"),
            "recall_precision",
            "Recall precision by scenario class",
            "chart-precision",
        ),
        "residue": _groups_chart(
            results,
            ("residue", "by_removal"),
            "residue_rate",
            "Residue after removal, by kind of removal",
            "chart-residue",
        ),
    }
    if results.get("intervals"):
        for half in results["intervals"].get("record") or {}:
            drawn[f"classes_{half}"] = class_chart(results, half=half, chart_id=f"chart-{half}")
    if dig(results, "record", "floor_sweep"):
        drawn["sweep"] = sweep_chart(results)
    return drawn


def html_report(results: dict[str, Any]) -> str:
    """A self-contained HTML page: the table, the thresholds and the three charts."""
    return render_to_string(
        "evaluation/report.html",
        {
            "results": results,
            "rows": rows(results),
            "with_cache": "cache" in results,
            "with_store": "store" in results,
            "charts": charts(results),
            "intervals": "\n".join(interval_lines(results)) if results.get("intervals") else "",
            "by_class": class_rows(results),
        },
    )


def class_rows(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Per scenario class: decisions, accuracy and precision of each configuration."""
    record = dig(results, "record", "decisions", "by_class") or {}
    cache = dig(results, "cache", "decisions", "by_class") or {}
    found = []
    for cls, figures in record.items():
        other = cache.get(cls) or {}
        found.append(
            {
                "cls": cls.replace("_", " "),
                "decisions": figures.get("decisions"),
                "record_accuracy": shown(figures.get("decision_accuracy"), "share"),
                "record_precision": shown(figures.get("recall_precision"), "share"),
                "cache_accuracy": shown(other.get("decision_accuracy"), "share") if other else None,
                "cache_precision": shown(other.get("recall_precision"), "share") if other else None,
            }
        )
    return found
