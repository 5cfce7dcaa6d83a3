"""Helpers of the tests that start real processes (up, gunicorn, the MCP server)."""

from __future__ import annotations

import socket
import sys
from pathlib import Path


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def memoryconsole_command() -> list[str]:
    """The ``memoryconsole`` entry point of this environment."""
    script = Path(sys.executable).with_name("memoryconsole")
    return [str(script)] if script.exists() else [sys.executable, "-m", "memoryconsole.cli"]
