"""``memoryconsole load-demo``: the demo tenant, its people and an agent credential."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from memoryconsole.demo import describe, load_demo


class Command(BaseCommand):
    help = (
        "Load the demo tenant 'demo' (Demo Co) with one login per role and an agent "
        "credential. Idempotent: a second run changes nothing and issues no new token."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        context = load_demo()
        for line in describe(context):
            self.stdout.write(line)
