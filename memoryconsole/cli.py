"""The ``memoryconsole`` command: every Django management command, under one name.

An entry point: before Django runs the command it prepares the instance
(:func:`memoryconsole.instance.setup`: generated secrets, the embedded PostgreSQL), except for
the commands that need neither.

``memoryconsole up``, ``memoryconsole migrate``, ``memoryconsole create-tenant acme`` ... The
product's own commands are spelled with hyphens here and with underscores as Django modules
(``manage.py create_tenant`` works too).
"""

from __future__ import annotations

import os
import sys

# Commands that change the schema run as the owner role (a restore migrates the schema it
# restored); everything else as the application role, under row-level security.
OWNER_COMMANDS = frozenset(
    {"migrate", "makemigrations", "sqlmigrate", "showmigrations", "flush", "restore"}
)
# Commands that never touch the database or the instance's home: they start no server and
# generate no secret (the image runs collectstatic while it is built).
INSTANCE_FREE_COMMANDS = frozenset(
    {"help", "version", "check", "collectstatic", "findstatic", "diffsettings", "startapp"}
)


def prepare_environment(argv: list[str]) -> list[str]:
    """Set the settings module and the database role for ``argv``; return the Django argv."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryconsole.settings")
    args = list(argv)
    if len(args) > 1 and not args[1].startswith("-"):
        args[1] = args[1].replace("-", "_")
        if args[1] in OWNER_COMMANDS:
            os.environ["MEMORYCONSOLE_DB_ROLE"] = "owner"
    return args


def main(argv: list[str] | None = None) -> None:
    raw = list(sys.argv if argv is None else argv)
    if len(raw) > 1 and raw[1] == "mcp":
        # The MCP server talks to the API over HTTP; it needs neither Django nor a database.
        from memoryconsole import mcp_server

        mcp_server.main(raw[2:])
        return
    args = prepare_environment(raw)
    command = args[1] if len(args) > 1 and not args[1].startswith("-") else "help"
    if command not in INSTANCE_FREE_COMMANDS:
        from memoryconsole import embedded, instance

        try:
            instance.setup()
        except embedded.EmbeddedServerError as exc:
            sys.exit(f"memoryconsole: {exc}")
    from django.core.management import execute_from_command_line

    execute_from_command_line(args)


if __name__ == "__main__":
    main()
