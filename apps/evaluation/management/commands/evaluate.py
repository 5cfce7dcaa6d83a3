"""``memoryconsole evaluate``: run generated scenario sets (one per seed) or a scenario file in
a sandbox, beside the fair store and the cache; print the figures, check them.

With ``--tenant SLUG --replay``: replay the tenant's audited decision searches of a period on
today's memory instead (:mod:`apps.evaluation.replay`).

Exit status: 0 when every threshold, guarantee and gate holds (a replay: when it ran), 1 when
one fails, 2 when the evaluation could not run (an unreadable scenario file, an unknown
tenant, a bad period, a refused call).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from apps.core.actors import Actor
from apps.core.arguments import writable_file
from apps.core.progress import ProgressDisplay
from apps.evaluation.gates import BASELINE_PATH, baseline_of, baseline_read
from apps.evaluation.replay import PeriodError, period_parse, replay_summary, replay_table
from apps.evaluation.report import class_chart, comparison_chart, html_report, text_table
from apps.evaluation.runner import BASELINES, RecordSettings, evaluate
from apps.evaluation.sandbox import EvaluationFailed, TenantPolicy
from apps.evaluation.scenarios import ScenarioError, scenarios_load
from apps.evaluation.scenarios.generate import DEFAULT_PER_CLASS
from apps.evaluation.seeded import DEFAULT_SEEDS, evaluate_generated, seeds_from
from apps.evaluation.services import evaluation_run_execute, evaluation_run_open
from apps.tenancy.context import tenant_scope
from apps.tenancy.selectors import tenant_by_slug


def _baselines(raw: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in raw.split(",") if name.strip())
    unknown = [name for name in names if name not in BASELINES]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown baseline {', '.join(unknown)} (store, cache)")
    return names


def _is_gate(name: str) -> bool:
    """A per-class gate against the recorded figures (not a guarantee)."""
    return ".held_out." in name or ".tuning." in name or ".all." in name


class Command(BaseCommand):
    help = (
        "Run a scenario set through the memory in a sandbox tenant (created and removed), "
        "optionally beside a nearest-neighbour cache; print the figures and fail (exit 1) "
        "when a threshold of the set fails."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--scenarios",
            type=Path,
            help="A scenario file, run once (default: sets generated from --seeds seeds).",
        )
        parser.add_argument(
            "--seeds",
            type=int,
            default=DEFAULT_SEEDS,
            help=f"How many generator seeds (at least 2 for intervals; default {DEFAULT_SEEDS}).",
        )
        parser.add_argument(
            "--per-class",
            type=int,
            default=None,
            help="Decisions of each class in each half of each generated set (default "
            f"{DEFAULT_PER_CLASS}; the recorded figures were measured with it).",
        )
        parser.add_argument(
            "--record-baseline",
            action="store_true",
            help="Write this run's per-class figures (and the targets it reached) to "
            "docs/evaluation/baseline.json, which later runs are gated against.",
        )
        parser.add_argument(
            "--min-similarity",
            type=float,
            help="Search with this relevance floor instead of the model's (to see what a "
            "floor does; the sweep in the report shows the whole curve).",
        )
        parser.add_argument(
            "--without-scope",
            action="store_true",
            help="Search without the decision's scope (a broken configuration, for comparison).",
        )
        parser.add_argument(
            "--provisional-decisions",
            action="store_true",
            help="Take irreversible decisions on provisional memories too (a broken "
            "configuration, for comparison).",
        )
        parser.add_argument(
            "--tenant",
            help="Evaluate the memory as this tenant configures it (embedding model, promotion "
            "policy, retention rules); the run is stored and audited in the tenant, with its "
            "count of decisions at risk. Its own memories are never touched.",
        )
        parser.add_argument(
            "--against",
            type=_baselines,
            default=(),
            help="Baselines run on the same scenarios, side by side, comma-separated: store "
            "(shaped like LangGraph's store: namespaces, replace by key, real delete, TTL), "
            "cache (plain nearest neighbours).",
        )
        parser.add_argument(
            "--replay",
            action="store_true",
            help="With --tenant: re-run the tenant's audited decision searches of a period on "
            "today's memory and count how many would now return something different, and why "
            "(new memory, deleted, superseded, expired, conflict, ...). The question of a "
            "search is not kept, so a new memory is one that may now rank. Nothing is written.",
        )
        parser.add_argument(
            "--since",
            help="With --replay: the period's start, RFC 3339 or a duration back from now "
            "(P7D; default P30D).",
        )
        parser.add_argument(
            "--until",
            help="With --replay: the period's end (exclusive), RFC 3339 or a duration back "
            "from now (default now).",
        )
        parser.add_argument("--json", type=writable_file, help="Write the figures as JSON here.")
        parser.add_argument(
            "--html", type=writable_file, help="Write an HTML report with plots here."
        )
        parser.add_argument(
            "--plot",
            type=writable_file,
            help="Write the per-class chart (generated sets; else record beside the baselines) "
            "as SVG here.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["replay"] or options["since"] or options["until"]:
            self._replay(options)
            return
        raw = options["against"]
        # call_command passes the option as given, not through its type.
        try:
            against = _baselines(raw) if isinstance(raw, str) else tuple(raw or ())
        except argparse.ArgumentTypeError as exc:
            raise CommandError(str(exc), returncode=2) from exc
        settings = RecordSettings(
            min_similarity=options["min_similarity"],
            scope_filter=not options["without_scope"],
            confirmed_for_decisions=not options["provisional_decisions"],
        )
        if not settings.is_default and (options["tenant"] or options["record_baseline"]):
            # A tenant's stored run and the recorded figures measure the product as designed.
            raise CommandError(
                "--min-similarity, --without-scope and --provisional-decisions do not go with "
                "--tenant or --record-baseline.",
                returncode=2,
            )
        progress = ProgressDisplay()
        beside = f"beside {' and '.join(against)} " if against else ""
        try:
            if options["scenarios"] or options["tenant"]:
                scenario_set = self._scenario_set(options["scenarios"])
                self.stderr.write(
                    f"evaluating {len(scenario_set.scenarios)} decisions and "
                    f"{len(scenario_set.canaries)} canaries of {scenario_set.source} "
                    f"{beside}in a sandbox"
                )
                if options["tenant"]:
                    results = self._for_tenant(
                        options["tenant"], scenario_set, "cache" in against, progress
                    )
                else:
                    results = evaluate(
                        scenario_set, against=against, settings=settings, progress=progress
                    )
            else:
                if options["seeds"] < 1 or (options["per_class"] or 1) < 1:
                    raise CommandError("--seeds and --per-class must be at least 1.", returncode=2)
                seeds = seeds_from(options["seeds"])
                self.stderr.write(
                    f"evaluating generated sets of seeds {seeds[0]}-{seeds[-1]} {beside}"
                    "in a sandbox each"
                )
                per_class = options["per_class"] or DEFAULT_PER_CLASS
                results = evaluate_generated(
                    seeds=seeds,
                    per_class=per_class,
                    against=against,
                    settings=settings,
                    progress=progress,
                )
                if options["record_baseline"]:
                    self._record_baseline(results, seeds, per_class)
        except EvaluationFailed as exc:
            raise CommandError(f"The evaluation could not run: {exc}", returncode=2) from exc
        finally:
            progress.close()
        self.stdout.write(text_table(results))
        if options["json"]:
            options["json"].write_text(json.dumps(results, indent=1, default=str) + "\n")
        if options["html"]:
            options["html"].write_text(html_report(results))
        if options["plot"]:
            chart = class_chart(results) if results.get("intervals") else comparison_chart(results)
            options["plot"].write_text(chart + "\n")
        if not results.get("passed"):
            raise CommandError("A threshold failed (see FAIL above).", returncode=1)

    def _scenario_set(self, path: Path | None) -> Any:
        try:
            return scenarios_load(path)
        except ScenarioError as exc:
            raise CommandError(
                "The scenario set is not usable:\n  " + "\n  ".join(exc.problems[:20]), returncode=2
            ) from exc

    def _record_baseline(self, results: dict[str, Any], seeds: list[int], per_class: int) -> None:
        """Record the per-class figures later runs are gated against; refused when a guarantee
        failed (a defect is never recorded as the figure to keep)."""
        failed = [t["name"] for t in results["thresholds"] if not t["passed"]]
        guarantees = [name for name in failed if not _is_gate(name)]
        if guarantees:
            raise CommandError(
                f"Not recorded: guarantees failed ({', '.join(guarantees)}).", returncode=1
            )
        path = BASELINE_PATH
        data = baseline_of(
            results["intervals"],
            embedding_model=results["embedding_model"],
            seeds=seeds,
            per_class=per_class,
            previous=baseline_read(path),
            met=[t["name"] for t in results["targets"] if t["met"]],
        )
        path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        self.stderr.write(f"recorded the per-class figures in {path}")
        # This run is now the figure to keep: its own gates hold by definition.
        results["thresholds"] = [t for t in results["thresholds"] if not _is_gate(t["name"])]
        results["passed"] = all(t["passed"] for t in results["thresholds"])

    def _for_tenant(
        self, slug: str, scenario_set: Any, against_cache: bool, progress: ProgressDisplay
    ) -> dict[str, Any]:
        tenant = tenant_by_slug(slug)
        if tenant is None:
            raise CommandError(f"No tenant {slug!r}.", returncode=2)
        TenantPolicy.of(tenant)  # refuses an unusable embedding model before anything runs
        run = evaluation_run_open(
            tenant=tenant,
            actor=Actor.system("memoryconsole evaluate"),
            scenario_set=scenario_set,
            against_cache=against_cache,
        )
        finished = evaluation_run_execute(run=run, scenario_set=scenario_set, progress=progress)
        if finished.results is None:
            raise EvaluationFailed(finished.error)
        self.stderr.write(f"stored as evaluation run {finished.pk} of {slug}")
        results: dict[str, Any] = finished.results
        return results

    def _replay(self, options: dict[str, Any]) -> None:
        """``--replay``: the tenant's decision searches of the period, on today's memory."""
        if not options["replay"]:
            raise CommandError("--since and --until go with --replay.", returncode=2)
        if not options["tenant"]:
            raise CommandError("--replay needs --tenant SLUG.", returncode=2)
        others = [
            f"--{name.replace('_', '-')}"
            for name in ("scenarios", "record_baseline", "against", "html", "plot")
            if options[name]
        ]
        if others:
            raise CommandError(f"{', '.join(others)} do not go with --replay.", returncode=2)
        slug = options["tenant"]
        tenant = tenant_by_slug(slug)
        if tenant is None:
            raise CommandError(f"No tenant {slug!r}.", returncode=2)
        try:
            since, until = period_parse(options["since"], options["until"], now=timezone.now())
        except PeriodError as exc:
            raise CommandError(str(exc), returncode=2) from exc
        self.stderr.write(
            f"replaying the decision searches of {slug} from "
            f"{since.isoformat(timespec='seconds')} to {until.isoformat(timespec='seconds')}"
        )
        with tenant_scope(tenant.pk), ProgressDisplay() as bar:
            summary = replay_summary(
                since=since,
                until=until,
                progress=lambda done, total: bar("replaying decision searches", done, total),
            )
        self.stdout.write(replay_table(summary, slug), ending="")
        if options["json"]:
            options["json"].write_text(
                json.dumps(summary.as_json(slug), indent=1, default=str) + "\n"
            )
