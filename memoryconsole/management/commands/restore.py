"""``memoryconsole restore PATH [--force]``: a backup back in place, erasures made since
re-applied."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection, connections

from apps.governance.ledger import ledger_reapply
from memoryconsole.backup import (
    BACKUP_URL_ENV,
    BackupError,
    all_tenants_connection,
    census,
    compare,
    restore,
)


class Command(BaseCommand):
    help = (
        "Restore the backup in PATH (made by `backup`), then migrate and re-apply every "
        "erasure, deletion, redaction and run close recorded since, so none comes back. "
        "Refuses a database holding tenants or users unless --force."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", type=Path, help="a directory `memoryconsole backup` wrote")
        parser.add_argument(
            "--force", action="store_true", help="replace a database that holds data"
        )
        parser.add_argument(
            "--database-url",
            help="a superuser or BYPASSRLS login on an external server (default: "
            f"${BACKUP_URL_ENV}, else DATABASE_URL); the embedded server needs none",
        )

    def handle(
        self, *args: Any, path: Path, force: bool, database_url: str | None, **options: Any
    ) -> None:
        def progress(line: str) -> None:
            print(f"restore: {line}", file=sys.stderr, flush=True)

        dbname = connection.settings_dict["NAME"]
        # This process's own sessions would count as the database being in use.
        connections.close_all()
        try:
            target = all_tenants_connection(database_url, dbname)
            restored = restore(
                path.resolve(),
                connection=target,
                owner_role=str(settings.DATABASE_OWNER["USER"]),
                force=force,
                progress=progress,
            )
        except BackupError as exc:
            raise CommandError(str(exc)) from exc
        manifest = restored.manifest
        progress("migrating to this version's schema")
        call_command("migrate", interactive=False, verbosity=0)
        progress("re-applying the erasure ledger")
        report = ledger_reapply(
            progress=lambda done, total: progress(f"ledger entry {done}/{total}")
        )
        with target.connect() as conn:
            differences = compare(manifest, census(conn))
        self.stdout.write(
            f"restored {path.resolve()} (taken at {manifest['taken_at']}, version "
            f"{manifest['version']})"
        )
        applied = ", ".join(f"{n} {kind}" for kind, n in sorted(report.applied.items()))
        removed = ", ".join(f"{n} {name}" for name, n in sorted(report.removed.items()))
        self.stdout.write(
            f"erasure ledger: {report.entries} entries read"
            + (
                f"; re-applied {applied} (removed {removed})"
                if applied
                else "; nothing to re-apply"
            )
        )
        for line in report.refused:
            self.stdout.write(f"NOT RE-APPLIED {line}")
        if differences:
            self.stdout.write("rows per tenant that differ from the backup's manifest:")
            for line in differences:
                self.stdout.write(line)
        else:
            self.stdout.write("every tenant's row counts match the backup's manifest")
        if report.refused:
            raise CommandError(f"{len(report.refused)} ledger entries could not be re-applied")
