"""Importing the settings has no side effects; the entry points prepare the instance, and the
embedded server stops with its last holder however the others ended."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from memoryconsole import instance
from tests.processes import wait_ready

FOREIGN_ENV = ("DATABASE_URL", "DATABASE_APP_URL", "CELERY_BROKER_URL", "SECRET_KEY")


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in FOREIGN_ENV}
    env.update(MEMORYCONSOLE_HOME=str(home), DJANGO_SETTINGS_MODULE="memoryconsole.settings")
    return env


def _postmasters(home: Path) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["cmdline"]):
        cmdline = process.info["cmdline"] or []
        if cmdline and cmdline[0].endswith("postgres") and str(home) in " ".join(cmdline):
            found.append(process)
    return found


def test_importing_the_settings_starts_nothing_and_writes_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    script = (
        "import django; django.setup(); from django.conf import settings; "
        "import memoryconsole.celery, memoryconsole.urls; "
        "print(settings.DATABASES['default']['HOST'])"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], env=_env(home), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(home / "pgdata")
    assert not home.exists()
    assert _postmasters(home) == []


def test_a_generated_secret_is_kept_once_for_its_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "home" / instance.SECRET_KEY_FILE
    first = instance.ensure_secret(path)
    assert len(first) >= 50
    assert instance.ensure_secret(path) == first
    assert path.stat().st_mode & 0o777 == 0o600
    assert list(path.parent.iterdir()) == [path]  # no temporary file left


@pytest.mark.slow
def test_the_last_holder_stops_the_server_after_another_was_killed(tmp_path: Path) -> None:
    home = tmp_path / "home"
    hold = "from memoryconsole import instance; instance.setup(); print('held', flush=True); "
    killed = subprocess.Popen(
        [sys.executable, "-c", hold + "import time; time.sleep(600)"],
        env=_env(home),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert killed.stdout is not None
        assert killed.stdout.readline().strip() == "held"
        [postmaster] = _postmasters(home)
    finally:
        killed.send_signal(signal.SIGKILL)  # leaves no clean-up of its own behind
        killed.wait(10)
    assert postmaster.is_running()
    last = subprocess.run(
        [sys.executable, "-c", hold], env=_env(home), capture_output=True, text=True, timeout=120
    )
    assert last.returncode == 0, last.stderr
    wait_ready(lambda: not _postmasters(home), what="the server stopping after its last holder")
