"""``memoryconsole audit-verify TENANT``: recompute the tenant's audit chain."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.audit.selectors import audit_chain_verify
from apps.tenancy.context import tenant_scope
from apps.tenancy.selectors import tenant_by_slug


class Command(BaseCommand):
    help = "Check a tenant's audit chain; exit 1 naming the first broken link."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("tenant", help="tenant slug")

    def handle(self, *args: Any, tenant: str, **options: Any) -> None:
        found = tenant_by_slug(tenant)
        if found is None:
            raise CommandError(f"no tenant {tenant!r}")
        with tenant_scope(found.pk):
            result = audit_chain_verify()
        if not result.ok:
            where = f" at event #{result.broken_seq}" if result.broken_seq is not None else ""
            raise CommandError(
                f"audit chain of {found.slug} is broken{where}: "
                f"{result.problem} ({result.checked} events verified before it)"
            )
        self.stdout.write(f"audit chain of {found.slug} verified: {result.checked} events intact")
