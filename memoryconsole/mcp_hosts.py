"""``memoryconsole mcp --print-config HOST``: the MCP configuration of a host application
(Claude Desktop, Cursor, VS Code) that starts this stdio server.

A host starts the server from a directory of its choosing (Claude Desktop from ``/``), so a
relative command fails there: the configuration names this environment's entry point by its
absolute path, and carries in ``env`` everything the server reads (the API's address and the
agent credential), plus ``PYTHONPATH`` when one is set, so the host runs the very code that
printed it. Hosts hand a server only a few variables of their own environment.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

SERVER_NAME = "memoryconsole"
DEFAULT_URL = "http://127.0.0.1:8000"

# Where each host reads its configuration, for the hint on stderr (stdout is only the JSON,
# so it can be redirected into the file).
HOSTS: dict[str, str] = {
    "claude": (
        "Claude Desktop: merge into claude_desktop_config.json (Settings > Developer > Edit "
        "Config), then restart it"
    ),
    "cursor": "Cursor: merge into .cursor/mcp.json (this project) or ~/.cursor/mcp.json",
    "vscode": "VS Code: merge into .vscode/mcp.json (this workspace) or the user mcp.json",
}


class ConfigError(Exception):
    """The configuration cannot be printed as asked; the message is one line."""


def server_command() -> list[str]:
    """This environment's ``memoryconsole`` entry point, absolute: the console script beside
    the interpreter when it is installed, else the interpreter running the module. Neither is
    resolved through symbolic links: a virtual environment's interpreter is one, and only the
    link knows the environment."""
    script = Path(sys.executable).with_name("memoryconsole")
    if script.is_file() and os.access(script, os.X_OK):
        return [str(Path(os.path.abspath(script)))]
    return [os.path.abspath(sys.executable), "-m", "memoryconsole.cli"]


def server_env(*, url: str, token: str) -> dict[str, str]:
    """What the server reads from its environment. ``PYTHONPATH`` entries are made absolute:
    relative ones would name other directories from the host's working directory."""
    env = {"MEMORYCONSOLE_URL": url, "MEMORYCONSOLE_TOKEN": token}
    python_path = os.environ.get("PYTHONPATH")
    if python_path:
        env["PYTHONPATH"] = os.pathsep.join(
            os.path.abspath(entry) for entry in python_path.split(os.pathsep) if entry
        )
    return env


def host_config(host: str, *, url: str | None, token: str | None) -> dict[str, Any]:
    """The JSON a host reads, in its own format: ``mcpServers`` for Claude Desktop and Cursor,
    ``servers`` with ``"type": "stdio"`` for VS Code."""
    if host not in HOSTS:
        raise ConfigError(f"unknown host {host!r}: choose one of {', '.join(HOSTS)}")
    api_url = url or os.environ.get("MEMORYCONSOLE_URL") or DEFAULT_URL
    parts = urlsplit(api_url)
    if parts.scheme not in {"http", "https"} or not parts.netloc:
        raise ConfigError(f"the API's address {api_url!r} is not an http(s) URL")
    credential = token or os.environ.get("MEMORYCONSOLE_TOKEN")
    if not credential:
        # A placeholder would start a server whose every call fails: refuse instead.
        raise ConfigError(
            "no agent credential: set MEMORYCONSOLE_TOKEN or pass --token "
            "(memoryconsole create-token TENANT --name NAME prints one)"
        )
    command, *args = server_command()
    server: dict[str, Any] = {
        "command": command,
        "args": [*args, "mcp"],
        "env": server_env(url=api_url, token=credential),
    }
    if host == "vscode":
        return {"servers": {SERVER_NAME: {"type": "stdio", **server}}}
    return {"mcpServers": {SERVER_NAME: server}}


def print_config(host: str, *, url: str | None, token: str | None) -> int:
    """Print the host's configuration on stdout and where it goes on stderr; the exit
    status (2 for a refusal, which prints one line on stderr)."""
    try:
        config = host_config(host, url=url, token=token)
    except ConfigError as error:
        print(f"memoryconsole mcp: {error}", file=sys.stderr)
        return 2
    print(json.dumps(config, indent=2))
    print(
        f"{HOSTS[host]}. It holds the agent credential: keep it out of version control.",
        file=sys.stderr,
    )
    return 0
