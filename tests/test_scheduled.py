"""The worker records each success of a task that beat sent, and only those (health compares
them with the schedule: tests/api/test_schema.py)."""

from __future__ import annotations

import pytest

from memoryconsole.models import ScheduledRun
from memoryconsole.scheduled import BEAT_HEADER
from memoryconsole.tasks import tenant_probe

pytestmark = pytest.mark.django_db


def test_it_records_the_success_of_a_task_beat_sent():
    tenant_probe.apply(headers={BEAT_HEADER: True})
    assert ScheduledRun.objects.get(task="memoryconsole.tenant_probe").succeeded_at is not None


def test_it_records_nothing_for_a_task_sent_otherwise():
    tenant_probe.apply()
    assert not ScheduledRun.objects.exists()
