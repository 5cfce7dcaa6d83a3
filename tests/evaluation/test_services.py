"""Runs of a tenant: queued, claimed once, executed with committed progress, stored, audited."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from apps.audit.models import AuditEvent
from apps.core.actors import Actor
from apps.evaluation import services
from apps.evaluation.models import EvaluationRun, EvaluationRunState
from apps.evaluation.sandbox import EvaluationFailed
from apps.evaluation.tasks import evaluation_run_task
from apps.tenancy.context import tenant_scope
from apps.work.models import OutboxMessage, OutboxState
from tests.factories import EvaluationRunFactory

from .conftest import fake_results

pytestmark = pytest.mark.django_db

ADMIN = Actor(type="user", id="1", label="olivia")


@pytest.fixture
def fake_evaluate(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The sandbox run itself is tested end to end in test_runner; here it reports progress
    and returns canned figures."""
    calls: list[dict[str, Any]] = []

    def evaluate(scenario_set: Any, *, policy: Any, against_cache: bool, progress: Any) -> Any:
        calls.append({"policy": policy, "against_cache": against_cache})
        for done in range(1, 4):
            progress("deciding", done, 3)
        return fake_results()

    monkeypatch.setattr(services, "evaluate", evaluate)
    return calls


def test_the_worker_runs_a_queued_run_once_and_stores_its_figures(tenant, fake_evaluate):
    with tenant_scope(tenant.pk):
        run = services.evaluation_run_request(tenant=tenant, actor=ADMIN, against_cache=False)
        outbox = OutboxMessage.objects.get(object_id=run.pk)
    outcome = evaluation_run_task.run(
        run_id=str(run.pk), outbox_id=str(outbox.pk), tenant_id=str(tenant.pk)
    )
    assert outcome == EvaluationRunState.DONE
    assert fake_evaluate == [{"policy": fake_evaluate[0]["policy"], "against_cache": False}]
    with tenant_scope(tenant.pk):
        run.refresh_from_db()
        outbox.refresh_from_db()
        event = AuditEvent.objects.get(action="evaluation.run")
    assert run.passed is True
    assert run.results["tenant"] == {"slug": "acme", "decisions_at_risk": 0}
    assert (run.progress_done, run.progress_total) == (3, 3)
    assert outbox.state == OutboxState.DONE
    assert event.object_id == str(run.pk)
    assert event.data["passed"] is True
    assert event.actor_label == "olivia"
    # A copy of the message delivered again does nothing.
    again = evaluation_run_task.run(
        run_id=str(run.pk), outbox_id=str(outbox.pk), tenant_id=str(tenant.pk)
    )
    assert again != EvaluationRunState.DONE
    assert len(fake_evaluate) == 1


def test_a_run_in_progress_is_not_taken_twice_but_a_stalled_one_is(tenant):
    run = EvaluationRunFactory(
        tenant=tenant,
        requested_by_type="user",
        state=EvaluationRunState.RUNNING,
        updated_at=timezone.now(),
    )
    assert services.evaluation_run_claim(run.pk, tenant_id=tenant.pk) is None
    with tenant_scope(tenant.pk):
        EvaluationRun.objects.filter(pk=run.pk).update(
            updated_at=timezone.now() - services.STALLED_AFTER * 2
        )
    assert services.evaluation_run_claim(run.pk, tenant_id=tenant.pk) is not None


def test_a_run_that_cannot_finish_is_failed_with_the_reason_and_audited(tenant, monkeypatch):
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise EvaluationFailed("agent: POST /api/v1/records answered 400")

    monkeypatch.setattr(services, "evaluate", refuse)
    with tenant_scope(tenant.pk):
        run = services.evaluation_run_request(tenant=tenant, actor=ADMIN)
    finished = services.evaluation_run_execute(run=run)
    assert finished.state == EvaluationRunState.FAILED
    assert "answered 400" in finished.error
    with tenant_scope(tenant.pk):
        assert AuditEvent.objects.get(action="evaluation.run").data == {"error": finished.error}


def test_a_run_asked_for_another_scenario_set_is_not_run_on_this_one(tenant, fake_evaluate):
    with tenant_scope(tenant.pk):
        run = services.evaluation_run_request(tenant=tenant, actor=ADMIN)
        EvaluationRun.objects.filter(pk=run.pk).update(scenario_digest="0" * 64)
        run.refresh_from_db()
    finished = services.evaluation_run_execute(run=run)
    assert finished.state == EvaluationRunState.FAILED
    assert "changed" in finished.error
    assert fake_evaluate == []


def test_the_outbox_row_is_done_once_the_run_is_claimed(tenant, monkeypatch):
    """A run takes minutes: its outbox row must not wait meanwhile, or health would call the
    worker stalled (and ``up`` restart it) and the relay would offer the run again."""
    seen: list[str] = []

    def evaluate(*args: Any, **kwargs: Any) -> Any:
        with tenant_scope(tenant.pk):
            seen.append(OutboxMessage.objects.get(task_name=services.EVALUATION_RUN).state)
        return fake_results()

    monkeypatch.setattr(services, "evaluate", evaluate)
    with tenant_scope(tenant.pk):
        run = services.evaluation_run_request(tenant=tenant, actor=ADMIN)
        outbox = OutboxMessage.objects.get(object_id=run.pk)
    evaluation_run_task.run(run_id=str(run.pk), outbox_id=str(outbox.pk), tenant_id=str(tenant.pk))
    assert seen == [OutboxState.DONE]


def test_a_stalled_run_is_failed_when_another_is_asked_for(tenant):
    stalled = EvaluationRunFactory(
        tenant=tenant,
        requested_by_type="user",
        state=EvaluationRunState.RUNNING,
        updated_at=timezone.now() - services.STALLED_AFTER * 2,
    )
    with tenant_scope(tenant.pk):
        assert stalled.stalled
        services.evaluation_run_request(tenant=tenant, actor=ADMIN)
        stalled.refresh_from_db()
    assert stalled.state == EvaluationRunState.FAILED
    assert "worker stopped" in stalled.error
