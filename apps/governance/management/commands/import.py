"""``memoryconsole import PATH --tenant SLUG [--remap-ids]``: a ``memoryconsole.export/1``
file (``memoryconsole export``, ``GET /api/v1/subjects/{subject}/export``) brought into a
tenant of this instance, whole or not at all (apps/governance/importer.py, docs/export.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.core.actors import Actor
from apps.governance.importer import import_file
from apps.records.importing import ImportRefused
from apps.tenancy.selectors import tenant_by_slug


class Command(BaseCommand):
    help = (
        "Import an export file (memoryconsole export) into a tenant: its facts with every "
        "version, provenance, scope, trust and retention, an audit event for each "
        "(docs/export.md)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", metavar="PATH", help="a memoryconsole.export/1 file")
        parser.add_argument("--tenant", required=True, metavar="SLUG", help="the target tenant")
        parser.add_argument(
            "--remap-ids",
            action="store_true",
            help="give every item a new id (needed when the ids are taken on this instance)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        tenant = tenant_by_slug(options["tenant"])
        if tenant is None:
            raise CommandError(f"no tenant {options['tenant']!r}")
        path = Path(options["path"])
        if not path.is_file():
            raise CommandError(f"{path} is not a file")
        try:
            summary = import_file(
                path,
                tenant=tenant,
                actor=Actor.system("memoryconsole import"),
                remap_ids=options["remap_ids"],
            )
        except ImportRefused as refused:
            raise CommandError(refused.detail) from refused
        imported = ", ".join(f"{n} {kind}" for kind, n in vars(summary.imported).items())
        self.stdout.write(
            f"imported into {tenant.slug} from {summary.source_tenant}: {imported}"
            + (" (new ids)" if summary.remapped else "")
        )
        if summary.left_out:
            left = ", ".join(f"{n} {kind}" for kind, n in summary.left_out.items())
            self.stdout.write(f"left out (not imported): {left}")
