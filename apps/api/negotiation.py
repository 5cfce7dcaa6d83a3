"""Content negotiation: ``application/problem+json`` is JSON the API answers in.

A client that names only ``application/problem+json`` in ``Accept`` (as clients that read
errors by their media type do) accepts the API's JSON: its answers are JSON, and its errors
are problem documents. An ``Accept`` that admits neither is still a ``406``.
"""

from __future__ import annotations

from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.request import Request

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
