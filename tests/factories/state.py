"""Runs, their episodes and checkpoints, and obligations: bare rows in the state a test
names (the services open, append and commit them one request at a time)."""

from __future__ import annotations

import factory

from apps.audit.services import content_digest
from apps.state.models import Checkpoint, Episode, Obligation, Run

from .base import TenantOwnedFactory, now
from .records import SAME_TENANT


class RunFactory(TenantOwnedFactory[Run]):
    """An open run of a task, opened by the system."""

    task_id = factory.Sequence(lambda n: f"task-{n}")
    owner = "service:checkout"
    opened_at = factory.LazyFunction(now)
    opened_by_type = "system"
    opened_by_label = "tests"

    class Meta:
        model = Run


class EpisodeFactory(TenantOwnedFactory[Episode]):
    """A turn of a run (pass ``seq``: a run numbers its episodes from 1)."""

    run = factory.SubFactory(RunFactory, tenant=SAME_TENANT)
    seq = 1
    role = "user"
    content = "where is my parcel?"
    created_at = factory.LazyFunction(now)

    class Meta:
        model = Episode


class CheckpointFactory(TenantOwnedFactory[Checkpoint]):
    """A run's state after ``step``, with the digest the service would store."""

    run = factory.SubFactory(RunFactory, tenant=SAME_TENANT)
    step = 0
    state = factory.LazyFunction(dict)
    state_digest = factory.LazyAttribute(lambda o: content_digest(o.state))
    created_at = factory.LazyFunction(now)

    class Meta:
        model = Checkpoint


class ObligationFactory(TenantOwnedFactory[Obligation]):
    """A pending obligation of a task, keyed by task, step and kind."""

    task_id = "task-1"
    kind = "charge"
    key = factory.Sequence(lambda n: f"task-1:{n}:charge")
    payload = factory.LazyFunction(lambda: {"amount": 42})
    created_at = factory.LazyFunction(now)
    created_by_type = "system"
    created_by_label = "tests"

    class Meta:
        model = Obligation
