"""``memoryconsole create-token TENANT --name NAME [--actions a,b,...]``.

Prints the new token, and nothing else, on stdout: ``TOKEN=$(memoryconsole create-token ...)``.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.core.actors import Actor
from apps.tenancy.models import DEFAULT_ACTIONS, Action
from apps.tenancy.selectors import tenant_by_slug
from apps.tenancy.services import credential_issue

from .create_tenant import _messages


class Command(BaseCommand):
    help = "Issue an agent credential for a tenant and print its token (shown once)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("tenant", help="tenant slug")
        parser.add_argument("--name", required=True, help="what the credential is for")
        parser.add_argument(
            "--actions",
            default=",".join(DEFAULT_ACTIONS),
            help=f"comma-separated, from: {', '.join(Action.values)} "
            f"(default: {','.join(DEFAULT_ACTIONS)})",
        )

    def handle(self, *args: Any, tenant: str, name: str, actions: str, **options: Any) -> None:
        found = tenant_by_slug(tenant)
        if found is None:
            raise CommandError(f"no tenant {tenant!r}; create it with: memoryconsole create-tenant")
        try:
            _, token = credential_issue(
                tenant=found, name=name, actions=actions, actor=Actor.system("create-token")
            )
        except ValidationError as exc:
            raise CommandError(_messages(exc)) from exc
        self.stdout.write(token)
