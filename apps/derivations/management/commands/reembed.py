"""``memoryconsole reembed [TENANT] [--model NAME]``: embed what lacks a vector, resumably."""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.core.arguments import positive_int
from apps.derivations.embedders import EmbedderUnavailable
from apps.derivations.reembed import BATCH_SIZE, ReembedRefused, reembed_embedder, tenant_reembed
from apps.tenancy.models import Tenant


class ProgressLine:
    """A one-line progress display on stderr: redrawn in place on a terminal, otherwise a
    line per tenth of the work (so logs stay short)."""

    def __init__(self, label: str, stream: TextIO) -> None:
        self.label = label
        self.stream = stream
        self.started = time.monotonic()
        self.interactive = stream.isatty()
        self.last_tenth = -1

    def __call__(self, done: int, total: int) -> None:
        fraction = done / total if total else 1.0
        elapsed = max(time.monotonic() - self.started, 1e-6)
        width = 30
        bar = "#" * int(fraction * width)
        line = (
            f"{self.label} [{bar:<{width}}] {done}/{total} ({fraction:.0%}) {done / elapsed:.0f}/s"
        )
        if self.interactive:
            self.stream.write(f"\r{line}")
        elif int(fraction * 10) != self.last_tenth:
            self.last_tenth = int(fraction * 10)
            self.stream.write(f"{line}\n")
        self.stream.flush()

    def close(self) -> None:
        if self.interactive:
            self.stream.write("\n")
            self.stream.flush()


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
            progress = ProgressLine(f"{each.slug} {name}", stderr)
            try:
                result = tenant_reembed(each, model=model, batch_size=batch_size, progress=progress)
            except ReembedRefused as exc:
                if tenant:
                    raise CommandError(str(exc)) from exc
                self.stdout.write(f"{each.slug}: skipped, {exc}")
                continue
            except EmbedderUnavailable as exc:
                raise CommandError(f"{each.slug}: {exc}") from exc
            finally:
                progress.close()
            changed = f"; {result.model} is now its model" if result.model_changed else ""
            self.stdout.write(
                f"{each.slug}: {result.records} records and {result.summaries} summaries "
                f"embedded with {result.model}{changed}"
            )
