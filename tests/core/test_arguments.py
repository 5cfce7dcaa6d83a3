"""The management commands refuse an unusable option value in one line, before doing
anything: exit status 2 from the command line, ``CommandError`` through ``call_command``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from apps.core.arguments import maintenance_work_mem


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["up", "--port", "70000"], "argument --port: 70000 is not a port number (1 to 65535)"),
        (["up", "--port", "0"], "argument --port: 0 is not a port number"),
        (["up", "--workers", "0"], "argument --workers: 0 is not at least 1"),
        (
            ["tenant_indexes", "--maintenance-work-mem", "bogus", "--dry-run"],
            "argument --maintenance-work-mem: 'bogus' is not an amount of memory",
        ),
        (
            ["tenant_indexes", "--maintenance-work-mem", "512mb"],
            "argument --maintenance-work-mem: '512mb' is not an amount of memory",
        ),
        (
            ["tenant_indexes", "--maintenance-work-mem", "64kB"],
            "'64kB' is outside what PostgreSQL accepts (1MB to 2147483647kB)",
        ),
        (["tenant_indexes", "--min", "0", "--dry-run"], "argument --min: 0 is not at least 1"),
        (["reembed", "--batch-size", "many"], "argument --batch-size: 'many' is not a whole"),
    ],
)
def test_it_refuses_an_unusable_option_before_running(argv: list[str], message: str) -> None:
    with pytest.raises(CommandError) as refused:
        call_command(*argv)
    assert message in str(refused.value)


def test_evaluate_refuses_a_report_path_in_a_missing_folder_before_running(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "nowhere" / "report.html"
    with pytest.raises(CommandError, match=f"argument --html: the folder {missing.parent}"):
        call_command("evaluate", "--html", str(missing))
    with pytest.raises(CommandError, match="is a folder, not a file"):
        call_command("evaluate", "--json", str(tmp_path))


def test_it_accepts_postgresql_memory_units() -> None:
    assert [maintenance_work_mem(v) for v in ("512MB", "2GB", "1048576", "1024kB")] == [
        "512MB",
        "2GB",
        "1048576",
        "1024kB",
    ]


def test_the_command_line_says_it_in_one_line_with_status_2(tmp_path: Path) -> None:
    # A DATABASE_URL nothing listens on: the entry point starts no server, and the option is
    # refused before anything connects.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_", "CELERY_"))}
    env.update(
        MEMORYCONSOLE_HOME=str(tmp_path),
        DATABASE_URL="postgresql://nobody@127.0.0.1:9/nothing",
        MEMORYCONSOLE_DB_ROLE="app",
    )
    result = subprocess.run(
        [sys.executable, "-m", "memoryconsole.cli", "up", "--port", "70000"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result
    assert "Traceback" not in result.stderr
    [error] = [line for line in result.stderr.splitlines() if "error:" in line]
    assert error.endswith("error: argument --port: 70000 is not a port number (1 to 65535)")
