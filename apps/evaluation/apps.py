from __future__ import annotations

from django.apps import AppConfig


class EvaluationConfig(AppConfig):
    name = "apps.evaluation"
    label = "evaluation"
    verbose_name = "Evaluation: scenario runs beside a cache, decisions at risk"
