"""Evaluation runs, in the state a test names (the worker runs real ones)."""

from __future__ import annotations

import factory

from apps.evaluation.models import EvaluationRun

from .base import TenantOwnedFactory, now


class EvaluationRunFactory(TenantOwnedFactory[EvaluationRun]):
    """A queued run of the shipped scenario set, asked for by the system."""

    scenario_set = "default"
    requested_by_type = "system"
    requested_at = factory.LazyFunction(now)

    class Meta:
        model = EvaluationRun
