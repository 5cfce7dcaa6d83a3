"""``memoryconsole healthcheck web``, without Django: a container's health check runs it every
few seconds, and setting Django up costs a second of CPU and 90 MB each time (this costs a
tenth of that). The ``memoryconsole`` entry point sends it here before Django starts;
``memoryconsole.management.commands.healthcheck`` has the worker's and beat's checks.
"""

from __future__ import annotations

import argparse
import os
import sys
import urllib.error
import urllib.request

DEFAULT_URL = "http://127.0.0.1:8000/api/v1/health/live"
TIMEOUT = 5.0
# memoryconsole/settings.py's default too.
ALLOWED_HOSTS_DEFAULT = "127.0.0.1,localhost,[::1]"


class Unhealthy(Exception):
    """Why a process is not healthy: printed as one line, exit status 1. ``mended_by_restart``:
    restarting the process is the remedy (``healthcheck --stop-main-process``)."""

    def __init__(self, message: str, *, mended_by_restart: bool = False) -> None:
        super().__init__(message)
        self.mended_by_restart = mended_by_restart


def allowed_hosts() -> list[str]:
    raw = os.environ.get("ALLOWED_HOSTS", ALLOWED_HOSTS_DEFAULT)
    return [item.strip() for item in raw.split(",") if item.strip()]


def host_header(hosts: list[str]) -> str:
    """A Host the web server accepts (``ALLOWED_HOSTS``): the check connects to this machine,
    but a server that serves ``memory.example.com`` only refuses ``127.0.0.1`` (400)."""
    for host in hosts:
        if host == "*":
            break
        # ".example.com" allows example.com and every subdomain.
        return host.lstrip(".") or "localhost"
    return "localhost"


def check_web(url: str, hosts: list[str]) -> str:
    request = urllib.request.Request(url, headers={"Host": host_header(hosts)})  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as response:  # noqa: S310
            status = response.status
    except urllib.error.HTTPError as exc:
        status = exc.code
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise Unhealthy(f"{url} does not answer: {reason}") from None
    if status != 200:
        raise Unhealthy(f"{url} answered {status}")
    return f"{url} answered 200"


def web_main(argv: list[str]) -> int:
    """``memoryconsole healthcheck web [--url URL]``: 0 when the URL answers 200, else 1."""
    parser = argparse.ArgumentParser(
        prog="memoryconsole healthcheck web",
        description="Exit 0 when the web server's liveness URL answers 200, 1 when not.",
    )
    parser.add_argument("--url", default=DEFAULT_URL, help=f"default {DEFAULT_URL}")
    options = parser.parse_args(argv)
    try:
        verdict = check_web(options.url, allowed_hosts())
    except Unhealthy as exc:
        print(f"web: unhealthy: {exc}", file=sys.stderr)
        return 1
    print(f"web: healthy: {verdict}")
    return 0
