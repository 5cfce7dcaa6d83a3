"""The demo tenant: complete after one load, unchanged by a second."""

from __future__ import annotations

import pytest

from apps.audit.models import AuditEvent
from apps.derivations.models import Summary
from apps.records.models import Conflict, MemoryRecord, PromotionRequest
from apps.state.models import Obligation, Run
from apps.tenancy.context import tenant_scope
from memoryconsole.demo import load_demo

pytestmark = pytest.mark.django_db


def counts(tenant_id):
    with tenant_scope(tenant_id):
        return {
            "records": MemoryRecord.objects.count(),
            "promotions": PromotionRequest.objects.filter(state="open").count(),
            "conflicts": Conflict.objects.filter(state="open").count(),
            "summaries": Summary.objects.filter(valid=True).count(),
            "runs": Run.objects.count(),
            "obligations": Obligation.objects.count(),
            "events": AuditEvent.objects.count(),
        }


def test_it_loads_something_for_every_console_page():
    context = load_demo()
    loaded = counts(context.tenant.pk)
    assert loaded["records"] >= 6
    assert loaded["promotions"] >= 2  # a second observation and an explicit request
    assert loaded["conflicts"] == 1
    assert loaded["summaries"] == 1
    assert loaded["runs"] == 1
    assert loaded["obligations"] == 1


def test_a_second_load_changes_nothing():
    first = load_demo()
    before = counts(first.tenant.pk)
    load_demo()
    assert counts(first.tenant.pk) == before
