"""What a run's close, by its agent or by the idle-run sweep, takes with it: the summaries
citing its episodes and session records, and their embeddings."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.utils import timezone

from apps.derivations.models import Embedding
from apps.state.models import Checkpoint, Episode, Run
from apps.tenancy.context import tenant_scope
from tests.api.support import assert_problem
from tests.derivations.support import SEARCH, SUMMARIES, drain
from tests.records.factories import body as record_body

from .support import RUNS, audit_events, ok, open_run

pytestmark = pytest.mark.django_db

SECRET = "zanzibar courier with the violet van"


def _episode(agent: Any, run_id: str, content: str = SECRET) -> dict[str, Any]:
    return ok(agent.post(f"{RUNS}/{run_id}/episodes", {"role": "tool", "content": content}), 201)


def _summary_of(agent: Any, source_type: str, source_id: str) -> dict[str, Any]:
    payload = {
        "text": f"{SECRET}, summarised",
        "sources": [{"type": source_type, "id": source_id}],
        "reason": "context for the next turn",
    }
    return ok(agent.post(SUMMARIES, payload), 201)


def _session_record(agent: Any, run_id: str, **overrides: Any) -> Any:
    payload = record_body(
        retention={"basis": "session"},
        source__run_id=run_id,
        sensitivity="internal",
        content=f"{SECRET} as a record",
        **overrides,
    )
    return agent.post("/api/v1/records", payload)


def _search_hits(agent: Any) -> list[dict[str, Any]]:
    return ok(agent.post(SEARCH, {"query": "zanzibar violet courier"}))["results"]


# --- closing a run invalidates what was derived from its episodes and session records ------


def test_it_invalidates_and_unembeds_summaries_of_a_runs_episodes_on_close(agent, tenant):
    run = open_run(agent)
    episode = _episode(agent, run["id"])
    summary = _summary_of(agent, "episode", episode["id"])
    drain()
    [hit] = _search_hits(agent)
    assert hit["type"] == "summary"

    ok(agent.post(f"{RUNS}/{run['id']}/close"))

    [close] = audit_events(tenant, "run.close")
    shown = ok(agent.get(f"{SUMMARIES}/{summary['id']}"))
    assert shown["valid"] is False
    assert shown["text"] is None
    assert shown["embeddings"] == []
    assert shown["invalidated"]["by_event"] == str(close.pk)
    assert "run closed" in shown["invalidated"]["reason"]
    assert _search_hits(agent) == []
    with tenant_scope(tenant.pk):
        assert not Embedding.objects.filter(summary_id=summary["id"]).exists()
    assert close.data["summaries_invalidated"] == 1


def test_it_invalidates_summaries_of_the_runs_session_records_on_close(agent, tenant):
    run = open_run(agent)
    record = ok(_session_record(agent, run["id"]), 201)
    summary = _summary_of(agent, "record", record["id"])
    drain()
    with tenant_scope(tenant.pk):
        assert Embedding.objects.filter(record_id=record["id"]).exists()

    ok(agent.post(f"{RUNS}/{run['id']}/close"))

    [close] = audit_events(tenant, "run.close")
    shown = ok(agent.get(f"{SUMMARIES}/{summary['id']}"))
    assert shown["valid"] is False
    assert shown["invalidated"]["by_event"] == str(close.pk)
    assert shown["embeddings"] == []
    with tenant_scope(tenant.pk):
        assert not Embedding.objects.filter(record_id=record["id"]).exists()
        assert not Embedding.objects.filter(summary_id=summary["id"]).exists()
    assert _search_hits(agent) == []


def test_it_leaves_summaries_of_other_runs_valid_on_close(agent, tenant):
    run = open_run(agent)
    other = open_run(agent, task_id="task-2")
    episode = _episode(agent, other["id"])
    summary = _summary_of(agent, "episode", episode["id"])
    ok(agent.post(f"{RUNS}/{run['id']}/close"))
    assert ok(agent.get(f"{SUMMARIES}/{summary['id']}"))["valid"] is True


def test_it_schedules_the_idle_run_sweep():
    schedule = settings.CELERY_BEAT_SCHEDULE
    assert any(entry["task"] == "state.close_idle_runs_all" for entry in schedule.values())


def runs_close_idle(*, tenant: Any) -> int:
    from apps.state.services import runs_close_idle as sweep

    closed: int = sweep(tenant=tenant)
    return closed


def _idle_for(run_id: str, tenant: Any, idle: timedelta) -> None:
    """Move every trace of the run's activity ``idle`` into the past."""
    then = timezone.now() - idle
    with tenant_scope(tenant.pk):
        Run.objects.filter(pk=run_id).update(opened_at=then)
        Episode.objects.filter(run_id=run_id).update(created_at=then)
        Checkpoint.objects.filter(run_id=run_id).update(created_at=then)


def test_the_sweep_closes_runs_idle_past_the_tenants_setting(agent, tenant):
    idle = open_run(agent, task_id="idle")
    episode = _episode(agent, idle["id"])
    summary = _summary_of(agent, "episode", episode["id"])
    record = ok(_session_record(agent, idle["id"]), 201)
    _idle_for(idle["id"], tenant, timedelta(days=8))
    # Opened long ago, but its last checkpoint is recent: not idle.
    busy = open_run(agent, task_id="busy")
    ok(agent.post(f"{RUNS}/{busy['id']}/checkpoints", {"step": 1, "state": {}}), 201)
    _idle_for(busy["id"], tenant, timedelta(days=8))
    with tenant_scope(tenant.pk):
        Checkpoint.objects.filter(run_id=busy["id"]).update(created_at=timezone.now())
    fresh = open_run(agent, task_id="fresh")

    with tenant_scope(tenant.pk):
        closed = runs_close_idle(tenant=tenant)
    assert closed == 1

    swept = ok(agent.get(f"{RUNS}/{idle['id']}"))
    assert swept["state"] == "closed"
    assert swept["closed_by"]["type"] == "system"
    assert swept["episodes_discarded"] == 1
    assert swept["records_expired"] == 1
    assert ok(agent.get(f"{RUNS}/{busy['id']}"))["state"] == "open"
    assert ok(agent.get(f"{RUNS}/{fresh['id']}"))["state"] == "open"
    [close] = audit_events(tenant, "run.close")
    assert close.actor_type == "system"
    assert close.object_id == idle["id"]
    assert "idle" in close.data["reason"]
    shown = ok(agent.get(f"{SUMMARIES}/{summary['id']}"))
    assert shown["valid"] is False
    assert shown["invalidated"]["by_event"] == str(close.pk)
    assert_problem(agent.get(f"/api/v1/records/{record['id']}"), 404)


def test_the_sweep_task_runs_in_its_tenants_context(agent, tenant):
    from apps.state.tasks import close_idle_runs
    from apps.tenancy.tasks import TENANT_HEADER

    run = open_run(agent)
    _idle_for(run["id"], tenant, timedelta(days=8))
    assert close_idle_runs.apply(headers={TENANT_HEADER: str(tenant.pk)}).get() == 1
    assert ok(agent.get(f"{RUNS}/{run['id']}"))["state"] == "closed"


def test_the_sweep_follows_the_tenants_idle_setting(agent, tenant):
    run = open_run(agent)
    _idle_for(run["id"], tenant, timedelta(days=2))
    with tenant_scope(tenant.pk):
        assert runs_close_idle(tenant=tenant) == 0
    tenant.run_idle_close_after = timedelta(days=1)
    tenant.save(update_fields=["run_idle_close_after"])
    with tenant_scope(tenant.pk):
        assert runs_close_idle(tenant=tenant) == 1
    assert ok(agent.get(f"{RUNS}/{run['id']}"))["state"] == "closed"


def test_the_sweep_leaves_another_tenants_runs_alone(agent, tenant, other_agent, other_tenant):
    theirs = open_run(other_agent)
    _idle_for(theirs["id"], other_tenant, timedelta(days=30))
    with tenant_scope(tenant.pk):
        assert runs_close_idle(tenant=tenant) == 0
    assert ok(other_agent.get(f"{RUNS}/{theirs['id']}"))["state"] == "open"


def test_the_default_idle_setting_is_seven_days(tenant):
    assert tenant.run_idle_close_after == timedelta(days=7)
