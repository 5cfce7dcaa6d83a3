"""The one cursor pagination of every API listing, and the envelope it documents."""

from __future__ import annotations

from typing import Any

from rest_framework.pagination import CursorPagination


class CursorPage(CursorPagination):
    """DRF's cursor pagination; its documented envelope says what every page carries:
    ``next`` and ``previous`` (a link, or null at either end) and ``results``."""

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        link = {
            "type": "string",
            "format": "uri",
            "nullable": True,
            "description": "The next (or previous) page, with its cursor; null at the end.",
        }
        return {
            "type": "object",
            "required": ["next", "previous", "results"],
            "properties": {"next": link, "previous": dict(link), "results": schema},
        }
