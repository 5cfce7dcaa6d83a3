"""``memoryconsole reclaim``: physically reclaim deleted rows now, instead of at the next run
of the worker's schedule."""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from apps.governance.reclamation import (
    RECLAIMED_TABLES,
    deletions_reclaim,
    deletions_rewrite,
    reclamation_plan,
)


class Command(BaseCommand):
    help = (
        "Vacuum the tables deletions touch, every index included, after rebuilding the HNSW "
        "indexes that lost 1 % or more of their vectors, and stamp each receipt deleted "
        "before the vacuum began with when its rows were reclaimed. The worker's beat "
        "schedule runs the same every 10 minutes. Searches and writes go on meanwhile."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--dry-run", action="store_true", help="say what would be rebuilt and stamped"
        )
        parser.add_argument(
            "--force", action="store_true", help="vacuum even when no receipt awaits it"
        )
        parser.add_argument(
            "--rewrite",
            action="store_true",
            help=(
                "also rewrite the tables and their indexes (VACUUM FULL), so no data file "
                "keeps a deleted row's bytes; locks each table while it is rewritten"
            ),
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["dry_run"]:
            pending, rebuilds = reclamation_plan()
            for tenant in pending.values():
                self.stdout.write(
                    f"tenant {tenant.tenant_id}: {tenant.receipts} receipt(s) await "
                    f"reclamation, {tenant.deleted_embeddings} embedding(s) deleted, "
                    f"{tenant.live_embeddings} held"
                )
            if not pending and not options["force"]:
                self.stdout.write("nothing awaits reclamation")
                return
            for rebuild in rebuilds:
                self.stdout.write(
                    f"would rebuild {rebuild.index} ({100 * rebuild.dead_share:.1f} % dead)"
                )
            tables = ", ".join(RECLAIMED_TABLES)
            self.stdout.write(f"would vacuum {len(RECLAIMED_TABLES)} tables: {tables}")
            return
        started = time.monotonic()

        def progress(message: str) -> None:
            self.stderr.write(f"[{time.monotonic() - started:6.1f} s] {message} ...")

        if options["rewrite"]:
            rewritten = deletions_rewrite(progress=progress)
            self.stdout.write(
                f"rewritten: {rewritten} receipt(s) stamped in {time.monotonic() - started:.1f} s"
            )
            return
        stamped = deletions_reclaim(force=options["force"], progress=progress)
        if not stamped and not options["force"]:
            self.stdout.write("nothing awaits reclamation (--force vacuums anyway)")
            return
        self.stdout.write(
            f"reclaimed: {stamped} receipt(s) stamped in {time.monotonic() - started:.1f} s"
        )
