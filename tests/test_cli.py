"""The ``memoryconsole`` command's own flags: ``--version`` and ``--help``."""

from __future__ import annotations

import json
import os
from pathlib import Path

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


def _print_config(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exited:
        cli.main(["memoryconsole", "mcp", "--print-config", *argv])
    out, err = capsys.readouterr()
    return int(exited.value.code or 0), out, err


@pytest.mark.parametrize(
    ("host", "servers", "extra"),
    [
        ("claude", "mcpServers", {}),
        ("cursor", "mcpServers", {}),
        ("vscode", "servers", {"type": "stdio"}),
    ],
)
def test_it_prints_each_hosts_configuration_with_absolute_paths(
    host: str,
    servers: str,
    extra: dict[str, str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MEMORYCONSOLE_TOKEN", "mc_from-env")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["src", "/opt/lib"]))
    status, out, err = _print_config(capsys, host, "--url", "http://memory.internal:8000")
    assert status == 0
    (entry,) = json.loads(out)[servers].values()
    command, *args = entry.pop("command"), *entry.pop("args")
    assert Path(command).is_absolute()
    assert args[-1] == "mcp"
    assert entry == {
        **extra,
        "env": {
            "MEMORYCONSOLE_URL": "http://memory.internal:8000",
            "MEMORYCONSOLE_TOKEN": "mc_from-env",
            # Relative entries would name other directories from the host's.
            "PYTHONPATH": os.pathsep.join([str(Path("src").absolute()), "/opt/lib"]),
        },
    }
    assert "keep it out of version control" in err


def test_a_token_argument_wins_over_the_environment(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMORYCONSOLE_TOKEN", "mc_from-env")
    monkeypatch.delenv("MEMORYCONSOLE_URL", raising=False)
    _, out, _ = _print_config(capsys, "cursor", "--token", "mc_given")
    env = json.loads(out)["mcpServers"]["memoryconsole"]["env"]
    assert env["MEMORYCONSOLE_TOKEN"] == "mc_given"
    assert env["MEMORYCONSOLE_URL"] == "http://127.0.0.1:8000"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["emacs", "--token", "t"], "unknown host 'emacs': choose one of claude, cursor, vscode"),
        (["claude"], "no agent credential: set MEMORYCONSOLE_TOKEN or pass --token"),
        (["claude", "--token", "t", "--url", "localhost:8000"], "is not an http(s) URL"),
        (["claude", "--token", "t", "--transport", "http"], "describes the stdio server only"),
    ],
)
def test_it_refuses_a_configuration_it_cannot_print_in_one_line(
    argv: list[str],
    message: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("MEMORYCONSOLE_TOKEN", raising=False)
    status, out, err = _print_config(capsys, *argv)
    assert (status, out) == (2, "")
    assert message in err
    assert len(err.strip().splitlines()) == 1
