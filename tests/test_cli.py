"""The ``memoryconsole`` command's own flags: ``--version`` and ``--help``."""

from __future__ import annotations

import pytest

from memoryconsole import about, cli


def test_it_prints_the_products_version(capsys: pytest.CaptureFixture[str]) -> None:
    cli.main(["memoryconsole", "--version"])
    assert capsys.readouterr().out == f"memoryconsole {about.version()}\n"
    assert about.version() == "0.1.0"  # pyproject.toml's


@pytest.mark.parametrize("argv", [["--help"], ["-h"], ["help"], []])
def test_it_lists_the_products_commands_first_one_line_each(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    cli.main(["memoryconsole", *argv])
    out = capsys.readouterr().out
    ours, django = out.split("Django's commands")
    for name in ("up", "mcp", "evaluate", "backup", "restore", "reembed", "tenant-indexes"):
        (line,) = [line for line in ours.splitlines() if line.startswith(f"  {name} ")]
        assert len(line) <= 100
    assert "migrate" in django
    assert "  migrate " not in ours
