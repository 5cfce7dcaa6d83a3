from __future__ import annotations

from django.apps import AppConfig


class ReviewConfig(AppConfig):
    """Promotion requests and their decisions, conflicts and their resolution, review claims,
    canned reasons and throughput. Claims and canned reasons are this app's models; promotion
    requests, their events and conflicts stay in ``records``, whose write path opens them
    (README, "Where the code is"); the rules of deciding them live here."""

    name = "apps.review"
    label = "review"
