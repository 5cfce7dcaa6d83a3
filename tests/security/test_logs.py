"""Personal data stays out of the logs: the access log drops query strings, the database logs
no failing statement's text or values."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from django.db import connection

from tests.processes import free_port

ROOT = Path(__file__).resolve().parent.parent.parent


def test_it_keeps_query_strings_out_of_the_access_log() -> None:
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "tests.security.echo_app",
            "--config",
            "python:memoryconsole.gunicorn_conf",
            "--bind",
            f"127.0.0.1:{port}",
            "--no-control-socket",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}/api/v1/facts?subject=user%3Apatient-4711&q=diabetes"
        deadline = time.monotonic() + 20
        while True:
            try:
                urllib.request.urlopen(url, timeout=2).read()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
    finally:
        server.terminate()
        output, _ = server.communicate(timeout=20)
    assert '"GET /api/v1/facts" 200' in output
    assert "patient-4711" not in output
    assert "diabetes" not in output


@pytest.mark.django_db
def test_it_configures_the_database_to_log_no_statement_values() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SHOW log_min_messages")
        assert cursor.fetchone()[0] == "log"
        cursor.execute("SHOW log_min_error_statement")
        assert cursor.fetchone()[0] == "panic"
        cursor.execute("SHOW log_error_verbosity")
        assert cursor.fetchone()[0] == "terse"
