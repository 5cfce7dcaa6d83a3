"""``memoryconsole create-tenant SLUG [--name NAME]``."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.core.errors import DomainError
from apps.tenancy.services import tenant_create


class Command(BaseCommand):
    help = "Create a tenant (an isolated memory space)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug", help="short unique name, e.g. acme")
        parser.add_argument("--name", default="", help="display name (default: the slug)")

    def handle(self, *args: Any, slug: str, name: str, **options: Any) -> None:
        try:
            tenant = tenant_create(slug=slug, name=name)
        except DomainError as exc:
            raise CommandError(_messages(exc)) from exc
        self.stdout.write(f"created tenant {tenant.slug} ({tenant.pk})")


def _messages(exc: DomainError) -> str:
    if exc.errors:
        return "; ".join(f"{field}: {' '.join(msgs)}" for field, msgs in exc.errors.items())
    return exc.detail
