"""Template context for the console layout."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest


def console(request: HttpRequest) -> dict[str, Any]:
    return {"console_tenant": getattr(request, "console_tenant", None)}
