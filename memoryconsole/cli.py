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
import re
import sys

# Commands that change the schema run as the owner role (a restore migrates the schema it
# restored); everything else as the application role, under row-level security.
OWNER_COMMANDS = frozenset(
    {"migrate", "makemigrations", "sqlmigrate", "showmigrations", "flush", "restore"}
)
# Commands that never prepare the instance: they start no server and generate no secret (the
# image runs collectstatic while it is built). healthcheck reads the database when it runs,
# and says it is unreachable rather than start the embedded one.
INSTANCE_FREE_COMMANDS = frozenset(
    {
        "help",
        "version",
        "check",
        "collectstatic",
        "findstatic",
        "diffsettings",
        "startapp",
        "healthcheck",
    }
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


# Listed by --help though it is no Django command (it needs neither Django nor a database).
MCP_HELP = "Serve the API as MCP tools to an agent, over stdio or streamable HTTP"
# Django's commands the product replaces with a refusal; --help lists them with Django's.
REFUSALS = frozenset({"dumpdata", "loaddata"})


def _one_line(text: str, width: int = 76) -> str:
    """A command's help as one line: its first sentence or clause, cut at a word."""
    first = re.split(r"(?<=[.:;])\s", text.strip(), maxsplit=1)[0].rstrip(".:;")
    if len(first) > width:
        first = first[: width - 3].rsplit(" ", 1)[0] + " ..."
    return first


def print_help() -> None:
    """The product's commands first, one line each, then Django's by name."""
    import django
    from django.core.management import get_commands, load_command_class

    from memoryconsole import about

    django.setup()
    product = {"mcp": MCP_HELP}
    others = []
    for name, app in get_commands().items():
        if (app == "memoryconsole" or app.startswith("apps.")) and name not in REFUSALS:
            product[name.replace("_", "-")] = _one_line(str(load_command_class(app, name).help))
        else:
            others.append(name)
    print(f"memoryconsole {about.version()}\n")
    print("Usage: memoryconsole COMMAND [options]   (memoryconsole COMMAND --help for its own)\n")
    print("Memory Console commands:")
    width = max(map(len, product))
    for name in sorted(product):
        print(f"  {name.ljust(width)}  {product[name]}")
    print("\nDjango's commands (dumpdata and loaddata point to backup and restore):")
    for index in range(0, len(sorted(others)), 6):
        print("  " + ", ".join(sorted(others)[index : index + 6]))


def main(argv: list[str] | None = None) -> None:
    raw = list(sys.argv if argv is None else argv)
    if len(raw) > 1 and raw[1] == "--version":
        from memoryconsole import about

        print(f"memoryconsole {about.version()}")
        return
    if len(raw) == 1 or raw[1] in {"-h", "--help"} or raw[1:] == ["help"]:
        prepare_environment(raw[:1])
        print_help()
        return
    if len(raw) > 1 and raw[1] == "mcp":
        # The MCP server talks to the API over HTTP; it needs neither Django nor a database.
        from memoryconsole import mcp_server

        mcp_server.main(raw[2:])
        return
    if raw[1:3] == ["healthcheck", "web"] and not {"-h", "--help"} & set(raw[3:]):
        # A container checks this every few seconds: no Django, whose setup costs a second.
        from memoryconsole import probe

        sys.exit(probe.web_main(raw[3:]))
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
