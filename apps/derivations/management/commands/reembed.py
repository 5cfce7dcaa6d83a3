"""``memoryconsole reembed [TENANT] [--model NAME]``: embed what lacks a vector, resumably."""

from __future__ import annotations

import functools
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.core.arguments import positive_int
from apps.core.progress import ProgressDisplay
from apps.derivations.embedders import EmbedderUnavailable
from apps.derivations.reembed import BATCH_SIZE, ReembedRefused, reembed_embedder, tenant_reembed
from apps.tenancy.models import Tenant


class Command(BaseCommand):
    help = (
        "Embed every live record and valid summary of a tenant (or of every tenant) that has "
        "no vector of the tenant's model, or of --model, which then becomes the tenant's "
        "model. Runs in batches, each committed on its own: interrupted, run it again with "
        "the same arguments and it continues where it stopped."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("tenant", nargs="?", help="the tenant's slug (default: every tenant)")
        parser.add_argument(
            "--model",
            help="e5-small, hashing-<dim> or st-<model>; becomes the tenant's model once every "
            "source has its vector (default: the tenant's current model)",
        )
        parser.add_argument(
            "--batch-size", type=positive_int, default=BATCH_SIZE, help=f"default {BATCH_SIZE}"
        )

    def handle(
        self, *args: Any, tenant: str | None, model: str | None, batch_size: int, **options: Any
    ) -> None:
        if batch_size < 1:
            raise CommandError("--batch-size must be at least 1")
        if model:
            try:
                model = reembed_embedder(model).name
            except EmbedderUnavailable as exc:
                raise CommandError(str(exc)) from exc
        if tenant:
            tenants = list(Tenant.objects.filter(slug=tenant))
            if not tenants:
                raise CommandError(f"no tenant {tenant!r}")
        else:
            tenants = list(Tenant.objects.order_by("slug"))
        stderr = options.get("stderr") or sys.stderr
        for each in tenants:
            name = model or each.embedding_model
            label = f"{each.slug} {name}"
            display = ProgressDisplay(stderr)
            try:
                result = tenant_reembed(
                    each,
                    model=model,
                    batch_size=batch_size,
                    progress=functools.partial(display, label),
                )
            except ReembedRefused as exc:
                if tenant:
                    raise CommandError(str(exc)) from exc
                self.stdout.write(f"{each.slug}: skipped, {exc}")
                continue
            except EmbedderUnavailable as exc:
                raise CommandError(f"{each.slug}: {exc}") from exc
            finally:
                display.close()
            changed = f"; {result.model} is now its model" if result.model_changed else ""
            self.stdout.write(
                f"{each.slug}: {result.records} records and {result.summaries} summaries "
                f"embedded with {result.model}{changed}"
            )
