"""Keyset pagination, the one way every list pages: the API's and the console's.

A list ordered by ``(moment, id)`` (newest or oldest first) pages by the last row it showed,
never by an offset: page 400 of 100k rows costs what page 1 costs. The position travels in
links as an opaque token: a damaged token is a form error (console) or a ``400`` (API), never
a 500. The API's listings page with DRF's cursor pagination (:class:`CursorPage`), which
keeps the same kind of position inside its ``cursor`` parameter; the console's lists use
:class:`Cursor` and :meth:`Cursor.older` / :meth:`Cursor.newer` for their filters.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django import forms
from django.db.models import Q
from rest_framework.pagination import CursorPagination

TOKEN_MAX_LENGTH = 100  # an ISO timestamp, "~" and a UUID fit with room to spare
DAMAGED_LINK = "This page link is damaged; start from the first page."


@dataclass(frozen=True)
class Cursor:
    """The ``(moment, id)`` of one row of a list ordered by time, then id."""

    moment: datetime
    id: uuid.UUID

    def token(self) -> str:
        return f"{self.moment.isoformat()}~{self.id}"

    def older(self, moment_field: str) -> Q:
        """The rows after this one in newest-first order: earlier, or as early with a
        smaller id. Written with a range on ``moment_field`` first, which a ``(moment,
        id)`` index scans from the cursor."""
        return Q(**{f"{moment_field}__lte": self.moment}) & (
            Q(**{f"{moment_field}__lt": self.moment}) | Q(pk__lt=self.id)
        )

    def newer(self, moment_field: str) -> Q:
        """The rows after this one in oldest-first order: later, or as late with a larger
        id (a range on ``moment_field`` first, as in :meth:`older`)."""
        return Q(**{f"{moment_field}__gte": self.moment}) & (
            Q(**{f"{moment_field}__gt": self.moment}) | Q(pk__gt=self.id)
        )

    @classmethod
    def parse(cls, token: str) -> Cursor | None:
        """The cursor of ``token``, or None when it is not one (or has no time zone)."""
        moment_text, _, id_text = token.partition("~")
        try:
            moment = datetime.fromisoformat(moment_text)
            return cls(moment, uuid.UUID(id_text)) if moment.tzinfo else None
        except ValueError:
            return None


class CursorField(forms.CharField):
    """A cursor from a pager link (hidden); empty means the first page."""

    widget = forms.HiddenInput

    def to_python(self, value: Any) -> Cursor | None:  # type: ignore[override]
        text = super().to_python(value)
        if not text:
            return None
        cursor = Cursor.parse(text) if len(text) <= TOKEN_MAX_LENGTH else None
        if cursor is None:
            raise forms.ValidationError(DAMAGED_LINK)
        return cursor


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
