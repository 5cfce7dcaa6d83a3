"""``memoryconsole create-token TENANT --name NAME [--actions a,b,...] [--no-restricted]``.

Prints the new token, and nothing else, on stdout: ``TOKEN=$(memoryconsole create-token ...)``.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.core.actors import Actor
from apps.core.errors import DomainError
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
        parser.add_argument(
            "--no-restricted",
            action="store_true",
            help="its reads leave out memories of the restricted sensitivity class (by default "
            "a credential sees them, like every other memory of its tenant)",
        )

    def handle(
        self,
        *args: Any,
        tenant: str,
        name: str,
        actions: str,
        no_restricted: bool = False,
        **options: Any,
    ) -> None:
        found = tenant_by_slug(tenant)
        if found is None:
            raise CommandError(f"no tenant {tenant!r}; create it with: memoryconsole create-tenant")
        try:
            _, token = credential_issue(
                tenant=found,
                name=name,
                actions=actions,
                sees_restricted=not no_restricted,
                actor=Actor.system("create-token"),
            )
        except DomainError as exc:
            raise CommandError(_messages(exc)) from exc
        self.stdout.write(token)
