"""``memoryconsole export --tenant SLUG [--subject S] [--output FILE]``: what a tenant holds
(about one subject, or about everyone) as ``memoryconsole.export/1`` JSON Lines
(docs/export.md), the same lines ``GET /api/v1/subjects/{subject}/export`` streams."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import IO, Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.governance.export import export_stream
from apps.records.validation import SUBJECT_MESSAGE, SUBJECT_RE, identifier_normalised
from apps.tenancy.models import Tenant

# Progress goes to stderr at most this often (seconds), and once at the end.
PROGRESS_EVERY = 1.0


class Command(BaseCommand):
    help = (
        "Export what a tenant holds about a subject (or, without --subject, everything) as "
        "JSON Lines: facts with every version, summaries citing them, runs, obligations, "
        "deletion receipts and audit events (docs/export.md)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", required=True, metavar="SLUG", help="the tenant")
        parser.add_argument("--subject", help="only what is held about this subject")
        parser.add_argument(
            "--output",
            metavar="FILE",
            help="write to FILE (a new file; written whole or not at all) instead of stdout",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        tenant = Tenant.objects.filter(slug=options["tenant"]).first()
        if tenant is None:
            raise CommandError(f"no tenant {options['tenant']!r}")
        subject = options["subject"]
        if subject is not None:
            subject = identifier_normalised(subject)
            if not SUBJECT_RE.match(subject):
                raise CommandError(f"--subject {options['subject']!r}: {SUBJECT_MESSAGE}")
        output = Path(options["output"]) if options["output"] else None
        if output is not None and output.exists():
            raise CommandError(f"{output} exists: export to a new file")
        if output is not None and not output.parent.is_dir():
            raise CommandError(f"{output.parent} is not a directory")

        started = last = time.monotonic()
        counts: dict[str, int] = {}

        def progress(kind: str, done: int) -> None:
            nonlocal last
            counts[kind] = done
            if time.monotonic() - last >= PROGRESS_EVERY:
                last = time.monotonic()
                self.stderr.write(f"exporting: {self._counts(counts)} ...")

        stream = export_stream(tenant=tenant, subject=subject, progress=progress)
        if output is None:
            for line in stream:
                self.stdout.write(line.decode(), ending="")
        else:
            self._write_whole(output, stream)
        where = f" to {output}" if output else ""
        self.stderr.write(
            f"exported {self._counts(counts) or 'nothing'}{where} "
            f"in {time.monotonic() - started:.1f} s"
        )

    @staticmethod
    def _counts(counts: dict[str, int]) -> str:
        return ", ".join(f"{n} {kind}" for kind, n in counts.items())

    @staticmethod
    def _write_whole(output: Path, stream: Any) -> None:
        """Into a temporary file beside ``output``, renamed once complete: a failed export
        leaves no file that looks like a whole one."""
        handle, temporary = tempfile.mkstemp(prefix=f".{output.name}.", dir=output.parent)
        try:
            sink: IO[bytes]
            with os.fdopen(handle, "wb") as sink:
                for line in stream:
                    sink.write(line)
            if output.exists():
                raise CommandError(f"{output} appeared meanwhile: export to a new file")
            os.replace(temporary, output)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
