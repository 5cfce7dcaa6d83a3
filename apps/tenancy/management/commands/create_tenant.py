"""``memoryconsole create-tenant SLUG [--name NAME]``."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.tenancy.services import tenant_create


class Command(BaseCommand):
    help = "Create a tenant (an isolated memory space)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug", help="short unique name, e.g. acme")
        parser.add_argument("--name", default="", help="display name (default: the slug)")

    def handle(self, *args: Any, slug: str, name: str, **options: Any) -> None:
        try:
            tenant = tenant_create(slug=slug, name=name)
        except ValidationError as exc:
            raise CommandError(_messages(exc)) from exc
        self.stdout.write(f"created tenant {tenant.slug} ({tenant.pk})")


def _messages(exc: ValidationError) -> str:
    if hasattr(exc, "error_dict"):
        return "; ".join(f"{field}: {' '.join(msgs)}" for field, msgs in exc.message_dict.items())
    return "; ".join(exc.messages)
