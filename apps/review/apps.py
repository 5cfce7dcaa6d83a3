from __future__ import annotations

from django.apps import AppConfig


class ReviewConfig(AppConfig):
    """Promotion requests and their decisions, conflicts and their resolution, review claims,
    canned reasons and throughput. The models stay in ``records`` (their tables are the
    records'); the rules of deciding live here."""

    name = "apps.review"
    label = "review"
