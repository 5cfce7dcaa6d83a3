"""Keyset pagination, the one way every list pages: the API's and the console's.

A list ordered by ``(moment, id)`` (newest or oldest first) pages by the last row it showed,
never by an offset: page 400 of 100k rows costs what page 1 costs. The position travels in
links as an opaque token: a damaged token is a form error (console) or a ``400`` (API), never
a 500. Every listing of the API pages with DRF's cursor pagination (:class:`CursorPage`),
which keeps the same kind of position inside its ``cursor`` parameter, takes ``page_size``
and answers ``{"next", "previous", "results"}`` with links relative to the server; the
console's lists use :class:`Cursor` and :meth:`Cursor.older` / :meth:`Cursor.newer` for their
filters.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.db.models import Model, Q, QuerySet
from rest_framework.exceptions import NotFound
from rest_framework.pagination import CursorPagination
from rest_framework.request import Request

from .errors import Invalid

PAGE_SIZE_DEFAULT = 50
PAGE_SIZE_LIMIT = 500
TOKEN_MAX_LENGTH = 100  # an ISO timestamp, "~" and a UUID fit with room to spare
DAMAGED_LINK = "This page link is damaged; start from the first page."


@dataclass(frozen=True)
class Cursor:
    """The ``(moment, id)`` of one row of a list ordered by time, then id; with a
    ``position`` (from 1), one of the several items a row holds in order (the memories one
    search returned)."""

    moment: datetime
    id: uuid.UUID
    position: int = 0

    def token(self) -> str:
        token = f"{self.moment.isoformat()}~{self.id}"
        return f"{token}~{self.position}" if self.position else token

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
        moment_text, _, rest = token.partition("~")
        id_text, marked, position_text = rest.partition("~")
        try:
            moment = datetime.fromisoformat(moment_text)
            position = int(position_text) if marked else 0
            if not moment.tzinfo or (marked and position < 1):
                return None
            return cls(moment, uuid.UUID(id_text), position)
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


DAMAGED_CURSOR = "Not a cursor this API issued; follow the next or previous link."


class CursorPage(CursorPagination):
    """DRF's cursor pagination, the same on every listing of the API: ``page_size`` (1 to
    :data:`PAGE_SIZE_LIMIT`, default :data:`PAGE_SIZE_DEFAULT`) and ``cursor`` in the query;
    ``next`` and ``previous`` (a link, or null at either end) and ``results`` in the answer.

    Links are relative to the server (``/api/v1/records?cursor=...``), like an erasure job's
    ``url``: an absolute one would be built from the request's ``Host`` and scheme, which
    name the proxy's side of the connection, not the address the client used."""

    page_size = PAGE_SIZE_DEFAULT
    page_size_query_param = "page_size"
    max_page_size = PAGE_SIZE_LIMIT

    def paginate_queryset(
        self, queryset: QuerySet[Any], request: Request, view: Any = None
    ) -> list[Any] | None:
        self._model: type[Model] = queryset.model
        page = super().paginate_queryset(queryset, request, view)
        # DRF builds its links on an absolute base URL; the same path and query, relative.
        self.base_url = request.get_full_path()
        return page

    def decode_cursor(self, request: Request) -> Any:
        # DRF checks a cursor's offset but not its position, which it then compares with the
        # first ordering field: a forged position must be a 400 here, not a database error.
        try:
            cursor = super().decode_cursor(request)
            if cursor is not None and cursor.position is not None:
                self._ordering_field().to_python(cursor.position)
        except (NotFound, ValidationError, ValueError, TypeError) as exc:
            raise Invalid(
                "Invalid query parameter: cursor.", errors={"cursor": [DAMAGED_CURSOR]}
            ) from exc
        return cursor

    def _ordering_field(self) -> Any:
        """The model field of the first ordering (DRF has made ``ordering`` a tuple by now)."""
        name = self.ordering[0].lstrip("-")
        if name == "pk":
            return self._model._meta.pk
        return self._model._meta.get_field(name)

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        return page_schema(schema)


# A page's ``next`` or ``previous`` link in the OpenAPI schema.
PAGE_LINK = {
    "type": "string",
    "format": "uri-reference",
    "nullable": True,
    "description": "The next (or previous) page: a path with its query, relative to the "
    "server; null at the end.",
}


def page_schema(results: dict[str, Any]) -> dict[str, Any]:
    """The OpenAPI schema of a page of ``results``: what :class:`CursorPage` answers."""
    return {
        "type": "object",
        "required": ["next", "previous", "results"],
        "properties": {"next": dict(PAGE_LINK), "previous": dict(PAGE_LINK), "results": results},
    }
