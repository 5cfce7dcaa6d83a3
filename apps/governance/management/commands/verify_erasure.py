"""``memoryconsole verify-erasure RECEIPT_ID``: search every store for what was deleted."""

from __future__ import annotations

import uuid
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.audit.models import DeletionReceipt
from apps.governance.verification import erasure_verify, replica_verify
from apps.tenancy import replicas
from apps.tenancy.context import tenant_scope
from apps.tenancy.models import Tenant


class Command(BaseCommand):
    help = "Verify a deletion receipt: zero residues in every store passes (exit 0), else exit 1."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("receipt_id", help="the id of a deletion receipt")

    def handle(self, *args: Any, receipt_id: str, **options: Any) -> None:
        try:
            pk = uuid.UUID(receipt_id)
        except ValueError as exc:
            raise CommandError(f"not a receipt id: {receipt_id!r}") from exc
        # Receipts are tenant rows under RLS: look in each tenant, as that tenant.
        for tenant in Tenant.objects.all():
            with tenant_scope(tenant.pk):
                receipt = DeletionReceipt.objects.filter(pk=pk).first()
                if receipt is None:
                    continue
                result = erasure_verify(receipt)
                # Each read replica once it has replayed the deletion: a copy is a store too.
                for alias in replicas.configured():
                    result.residues += replica_verify(alias, result)
                    result.checked.append(f"replica {alias}")
            self.stdout.write(
                f"receipt {pk} ({receipt.kind}) of tenant {tenant.slug}: "
                f"{len(result.record_ids)} deleted record ids searched in "
                f"{', '.join(result.checked)}"
            )
            for residue in result.residues:
                self.stdout.write(f"RESIDUE [{residue.store}] {residue.detail}")
            if not result.ok:
                raise CommandError(f"{len(result.residues)} residues found: verification failed")
            self.stdout.write("0 residues: verified")
            return
        raise CommandError(f"no deletion receipt {pk}")
