"""Content negotiation: ``application/problem+json`` is JSON the API answers in.

A client that names only ``application/problem+json`` in ``Accept`` (as clients that read
errors by their media type do) accepts the API's JSON: its answers are JSON, and its errors
are problem documents. An ``Accept`` that admits neither is still a ``406``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request

from .problems import JSONRenderer

JSON = "application/json"
PROBLEM_JSON = "application/problem+json"


def as_json(token: str) -> str:
    """An ``Accept`` token naming problem+json, as the same token naming JSON (its
    parameters, ``q`` among them, kept); any other token unchanged."""
    media_type, separator, parameters = token.partition(";")
    if media_type.strip().lower() == PROBLEM_JSON:
        return JSON + separator + parameters
    return token


class ProblemJsonNegotiation(DefaultContentNegotiation):
    """DRF's negotiation, where ``application/problem+json`` stands for ``application/json``."""

    def get_accept_list(self, request: Request) -> list[str]:
        return [as_json(token) for token in super().get_accept_list(request)]


NDJSON = "application/x-ndjson"


class NDJSONRenderer(BaseRenderer):
    """Lets a client ask for ``application/x-ndjson`` (an export's stream), which the view
    writes itself; anything DRF renders through it (an error) is one JSON line."""

    media_type = NDJSON
    format = "ndjson"
    charset = "utf-8"

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Mapping[str, Any] | None = None,
    ) -> bytes:
        if data is None:
            return b""
        return JSONRenderer().render(data, accepted_media_type, renderer_context) + b"\n"
