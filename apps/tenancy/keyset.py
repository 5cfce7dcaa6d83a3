"""Keyset positions for the console's long lists, shared by every page that pages by time.

A list ordered by ``(moment, id)`` (newest or oldest first) pages by the last row it showed,
never by an offset: page 400 of 100k rows costs what page 1 costs. The position travels in
links as an opaque token; a damaged token is a form error, never a 500.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django import forms

TOKEN_MAX_LENGTH = 100  # an ISO timestamp, "~" and a UUID fit with room to spare
DAMAGED_LINK = "This page link is damaged; start from the first page."


@dataclass(frozen=True)
class Cursor:
    """The ``(moment, id)`` of one row of a list ordered by time, then id."""

    moment: datetime
    id: uuid.UUID

    def token(self) -> str:
        return f"{self.moment.isoformat()}~{self.id}"

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
