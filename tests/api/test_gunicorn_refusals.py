"""What gunicorn refuses before the application sees it (a URL or headers past its limits, a
request line or header it cannot parse) is answered with a problem document too, through the
worker class of ``memoryconsole.gunicorn_conf``, the configuration ``up``, the image and
compose run. A real gunicorn serves a stub application, so only gunicorn's answers are read.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.processes import free_port, listening, wait_ready

from .support import PROBLEM_MEMBERS

ROOT = Path(__file__).resolve().parent.parent.parent


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
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
            "--workers",
            "1",
            "--no-control-socket",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_ready(lambda: listening(port), what=f"gunicorn on port {port}", process=server)
    except BaseException:
        server.kill()
        raise
    yield port
    server.terminate()
    output, _ = server.communicate(timeout=20)
    # The refusals are logged by kind, never with the request line and its query string.
    assert "patient-4711" not in output


def exchange(port: int, raw: bytes) -> tuple[int, dict[str, str], bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(raw)
        data = b""
        while chunk := connection.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    return int(status_line.split()[1]), headers, body


def request(target: str = "/api/v1/me", *headers: str, version: str = "HTTP/1.1") -> bytes:
    lines = [f"GET {target} {version}", "Host: localhost", *headers, "Connection: close"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


CASES = {
    "url-too-long": (request("/api/v1/facts?subject=user:patient-4711&q=" + "a" * 9000), 414),
    "header-too-long": (request("/api/v1/me", "X-Long: " + "h" * 9000), 431),
    "too-many-headers": (request("/api/v1/me", *(f"X-H{i}: v" for i in range(101))), 431),
    "bad-header-name": (request("/api/v1/me", "Bad Header: x"), 400),
    "obsolete-folding": (request("/api/v1/me", "X-A: a", " folded"), 400),
    "bad-version": (request("/api/v1/me", version="HTTP/9.1"), 400),
    "bad-request-line": (b"GET /api/v1/facts?subject=user:patient-4711\r\n\r\n", 400),
}


@pytest.mark.parametrize(("raw", "status"), CASES.values(), ids=CASES.keys())
def test_it_answers_gunicorns_refusals_with_problems(port, raw, status):
    answered, headers, body = exchange(port, raw)
    assert answered == status, body[:300]
    assert headers["content-type"] == "application/problem+json"
    assert headers["connection"] == "close"
    assert int(headers["content-length"]) == len(body)
    problem = json.loads(body)
    assert set(problem) >= PROBLEM_MEMBERS
    assert problem["status"] == status


def test_it_passes_what_fits_its_limits(port):
    url = "/api/v1/facts?q=" + "a" * 8000
    fits = request(url, *(f"X-H{i}: {'v' * 100}" for i in range(90)))
    answered, _, body = exchange(port, fits)
    assert answered == 200
    assert b"ok" in body
