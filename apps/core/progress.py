"""The progress of a long-running command, on stderr: a bar redrawn in place (rich) on a
terminal; elsewhere (CI logs, a pipe) a plain line when the phase changes or another tenth of
the work is done, so a log shows progress without thousands of redraws."""

from __future__ import annotations

import sys
from typing import TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)


class ProgressDisplay:
    """``display(phase, done, total)`` after each step; ``close()`` (or ``with``) at the end."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.console = Console(file=stream or sys.stderr, highlight=False)
        self.bar: Progress | None = None
        self.task: TaskID | None = None
        self.logged: tuple[str, int] | None = None

    def __call__(self, phase: str, done: int, total: int) -> None:
        if not self.console.is_terminal:
            share = done / total if total else 1.0
            mark = (phase, int(10 * share))
            if mark != self.logged:
                self.logged = mark
                self.console.out(f"{phase}: {done}/{total} ({share:.0%})")
            return
        if self.bar is None:
            self.bar = Progress(
                TextColumn("{task.description}", markup=False),
                BarColumn(),
                MofNCompleteColumn(),
                TaskProgressColumn(),
                TimeElapsedColumn(),
                console=self.console,
            )
            self.bar.start()
            self.task = self.bar.add_task(phase, total=total)
        assert self.task is not None
        self.bar.update(self.task, description=phase, completed=done, total=total)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None

    def __enter__(self) -> ProgressDisplay:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
