"""``memoryconsole backup PATH``: every tenant's data, a manifest and a checksum."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection

from memoryconsole import about
from memoryconsole.backup import BACKUP_URL_ENV, BackupError, all_tenants_connection, backup


class Command(BaseCommand):
    help = (
        "Back up the whole database (every tenant) into the new directory PATH: the dump, "
        "and a manifest with its SHA-256 and the row count of every table per tenant."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", type=Path, help="a directory to create (or an empty one)")
        parser.add_argument(
            "--database-url",
            help="a superuser or BYPASSRLS login on an external server (default: "
            f"${BACKUP_URL_ENV}, else DATABASE_URL); the embedded server needs none",
        )

    def handle(self, *args: Any, path: Path, database_url: str | None, **options: Any) -> None:
        def progress(line: str) -> None:
            # stderr: progress is for the person watching, stdout for what the command made.
            print(f"backup: {line}", file=sys.stderr, flush=True)

        try:
            target = all_tenants_connection(database_url, connection.settings_dict["NAME"])
            manifest = backup(
                path.resolve(), connection=target, version=about.version(), progress=progress
            )
        except BackupError as exc:
            raise CommandError(str(exc)) from exc
        tenants = manifest["tenants"]
        rows = sum(manifest["tables"].values())
        self.stdout.write(
            f"backed up {len(tenants)} tenant(s), {rows} rows in {len(manifest['tables'])} "
            f"tables, taken at {manifest['taken_at']}, into {path.resolve()}"
        )
