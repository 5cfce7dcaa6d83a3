"""``memoryconsole evaluate``: run a scenario set in a sandbox, print the figures, check them.

Exit status: 0 when every threshold of the scenario set holds, 1 when one fails, 2 when the
evaluation could not run (an unreadable scenario file, an unknown tenant, a refused call).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.core.actors import Actor
from apps.core.arguments import writable_file
from apps.evaluation.report import comparison_chart, html_report, text_table
from apps.evaluation.runner import evaluate
from apps.evaluation.sandbox import EvaluationFailed, TenantPolicy
from apps.evaluation.scenarios import ScenarioError, scenarios_load
from apps.evaluation.services import evaluation_run_execute, evaluation_run_open
from apps.tenancy.selectors import tenant_by_slug


class ProgressBar:
    """One line redrawn in a terminal; a line per phase elsewhere (CI logs)."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.phase = ""

    def __call__(self, phase: str, done: int, total: int) -> None:
        share = done / total if total else 1.0
        if self.tty:
            filled = int(30 * share)
            self.stream.write(
                f"\r[{'#' * filled}{'.' * (30 - filled)}] {100 * share:5.1f} % {phase[:40]:<40}"
            )
            if done >= total:
                self.stream.write("\n")
            self.stream.flush()
        elif phase != self.phase:
            self.stream.write(f"{100 * share:5.1f} % {phase}\n")
            self.stream.flush()
        self.phase = phase


class Command(BaseCommand):
    help = (
        "Run a scenario set through the memory in a sandbox tenant (created and removed), "
        "optionally beside a nearest-neighbour cache; print the figures and fail (exit 1) "
        "when a threshold of the set fails."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--scenarios", type=Path, help="A scenario file (default: the shipped set)."
        )
        parser.add_argument(
            "--tenant",
            help="Evaluate the memory as this tenant configures it (embedding model, promotion "
            "policy, retention rules); the run is stored and audited in the tenant, with its "
            "count of decisions at risk. Its own memories are never touched.",
        )
        parser.add_argument(
            "--against",
            choices=["cache"],
            help="Run the same scenarios against a plain nearest-neighbour cache, side by side.",
        )
        parser.add_argument("--json", type=writable_file, help="Write the figures as JSON here.")
        parser.add_argument(
            "--html", type=writable_file, help="Write an HTML report with plots here."
        )
        parser.add_argument(
            "--plot", type=writable_file, help="Write the record-versus-cache chart (SVG) here."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            scenario_set = scenarios_load(options["scenarios"])
        except ScenarioError as exc:
            raise CommandError(
                "The scenario set is not usable:\n  " + "\n  ".join(exc.problems[:20]),
                returncode=2,
            ) from exc
        against_cache = options["against"] == "cache"
        progress = ProgressBar(sys.stderr)
        self.stderr.write(
            f"evaluating {len(scenario_set.scenarios)} decisions and "
            f"{len(scenario_set.canaries)} canaries of {scenario_set.source} "
            f"{'beside a cache ' if against_cache else ''}in a sandbox"
        )
        try:
            if options["tenant"]:
                results = self._for_tenant(options["tenant"], scenario_set, against_cache, progress)
            else:
                results = evaluate(scenario_set, against_cache=against_cache, progress=progress)
        except EvaluationFailed as exc:
            raise CommandError(f"The evaluation could not run: {exc}", returncode=2) from exc
        self.stdout.write(text_table(results))
        if options["json"]:
            options["json"].write_text(json.dumps(results, indent=1, default=str) + "\n")
        if options["html"]:
            options["html"].write_text(html_report(results))
        if options["plot"]:
            options["plot"].write_text(comparison_chart(results) + "\n")
        if not results.get("passed"):
            raise CommandError("A threshold failed (see FAIL above).", returncode=1)

    def _for_tenant(
        self, slug: str, scenario_set: Any, against_cache: bool, progress: ProgressBar
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
