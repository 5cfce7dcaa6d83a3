"""Django commands the product refuses, with the one it offers instead.

Django's ``dumpdata`` and ``loaddata`` read and write as the application role, under row-level
security with no tenant set: they would see no tenant's rows (an "empty" dump of a full
instance, exit 0) or write none. The whole instance is backed up and restored with
``memoryconsole backup`` and ``restore``.
"""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser


class RefusedCommand(BaseCommand):
    """A command that always refuses with ``refusal``, before parsing its options."""

    refusal = ""

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("args", nargs="*")  # call_command's; the answer is the same

    def run_from_argv(self, argv: list[str]) -> None:
        # Refused before its options are parsed: Django's options (--indent, --format...)
        # would otherwise fail as unknown ones and hide the reason.
        try:
            self.handle()
        except CommandError as exc:
            sys.stderr.write(f"CommandError: {exc}\n")
            sys.exit(1)

    def handle(self, *args: Any, **options: Any) -> None:
        raise CommandError(self.refusal)
