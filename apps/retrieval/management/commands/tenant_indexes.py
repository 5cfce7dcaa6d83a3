"""``memoryconsole tenant-indexes``: give large tenants an HNSW index of their own."""

from __future__ import annotations

import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.core.arguments import maintenance_work_mem, positive_int
from apps.retrieval.tenant_indexes import build_label, tenant_index_plan, tenant_indexes_sync


class Command(BaseCommand):
    help = (
        "Build an HNSW index holding only its own vectors for every tenant with at least "
        "--min embeddings of its model, and inside such a tenant for every scope domain with "
        "at least --min (and at most half of the tenant's); drop those that fell below half "
        "of that or changed model. Builds run concurrently: searches and writes go on. The "
        "worker's beat schedule runs the same sync hourly."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--min",
            type=positive_int,
            default=None,
            help=f"embeddings that earn a tenant its index (default "
            f"{settings.TENANT_HNSW_MIN_EMBEDDINGS:,})",
        )
        parser.add_argument(
            "--maintenance-work-mem",
            type=maintenance_work_mem,
            default=settings.HNSW_BUILD_MEMORY,
            help="memory for each build (default %(default)s); the graph should fit in it",
        )
        parser.add_argument("--dry-run", action="store_true", help="say what would change")

    def handle(self, *args: Any, **options: Any) -> None:
        minimum = options["min"]
        if minimum is not None and minimum < 1:
            raise CommandError("--min must be at least 1")
        if options["dry_run"]:
            plan = tenant_index_plan(minimum=minimum)
            for name, tenant, model, _dimension, domain in plan.builds():
                self.stdout.write(f"would build {name} ({build_label(tenant, model, domain)})")
            for name in plan.drop:
                self.stdout.write(f"would drop {name}")
            self.stdout.write(f"{len(plan.keep)} index(es) stay as they are")
            return
        started = time.monotonic()

        def progress(message: str) -> None:
            self.stderr.write(f"[{time.monotonic() - started:6.1f} s] {message} ...")

        plan = tenant_indexes_sync(
            minimum=minimum,
            maintenance_work_mem=options["maintenance_work_mem"],
            progress=progress,
        )
        self.stdout.write(
            f"built {len(plan.created)}, dropped {len(plan.drop)}, kept {len(plan.keep)} "
            f"tenant index(es) in {time.monotonic() - started:.1f} s"
        )
