"""Evaluation runs of a tenant: asked for, run (in a sandbox), recorded and audited.

A run belongs to the tenant it evaluates: the console asks for one (a background job, through
the outbox, like an erasure job), ``memoryconsole evaluate --tenant`` runs one in the
foreground. Either way the scenarios run in a sandbox tenant copied from the tenant's
configuration (:class:`~apps.evaluation.sandbox.TenantPolicy`), the run's progress is
committed as it goes so the console can show it, and the figures and the outcome of every
threshold are stored on the run with one audit event. Nothing of the tenant's own memory is
read, except by the decisions-at-risk count.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from django.db import transaction
from django.utils import timezone

from apps.audit.services import audit_record
from apps.core.actors import Actor
from apps.tenancy.context import tenant_scope
from apps.tenancy.models import Tenant
from apps.work.outbox import outbox_enqueue

from .models import STALLED_AFTER, EvaluationRun, EvaluationRunState
from .runner import evaluate
from .sandbox import EvaluationFailed, TenantPolicy
from .scenarios import ScenarioError, ScenarioSet, scenarios_load
from .selectors import decisions_at_risk_count

logger = logging.getLogger(__name__)

EVALUATION_RUN = "evaluation.run"
# Progress is written at most this often (each write is a committed UPDATE).
PROGRESS_EVERY = 1.0

Progress = Callable[[str, int, int], None]


def _run_create(
    *, tenant: Tenant, actor: Actor, scenario_set: ScenarioSet, against_cache: bool, **state: Any
) -> EvaluationRun:
    """A run of ``scenario_set`` asked for now, and its audit event."""
    run = EvaluationRun.objects.create(
        tenant=tenant,
        # Its name, never the file's path: the run is shown through the API.
        scenario_set=scenario_set.name,
        scenario_digest=scenario_set.digest,
        against_cache=against_cache,
        requested_at=timezone.now(),
        **actor.fields("requested_by"),
        **state,
    )
    audit_record(
        tenant=tenant,
        actor=actor,
        action="evaluation.request",
        object_type="evaluation_run",
        object_id=str(run.pk),
        data={"scenario_set": run.scenario_set, "against_cache": against_cache},
    )
    return run


@transaction.atomic
def evaluation_run_request(
    *, tenant: Tenant, actor: Actor, against_cache: bool = True
) -> EvaluationRun:
    """Queue a run of the shipped scenario set for ``tenant`` (the worker runs it), in the
    caller's transaction, and audit the request. The shipped set only: a path on the server
    is not a console user's to choose."""
    scenario_set = scenarios_load()
    _fail_stalled(tenant=tenant, actor=actor)
    run = _run_create(
        tenant=tenant, actor=actor, scenario_set=scenario_set, against_cache=against_cache
    )
    outbox_enqueue(
        tenant_id=tenant.pk,
        task_name=EVALUATION_RUN,
        object_id=run.pk,
        payload={"run_id": str(run.pk)},
    )
    return run


def _fail_stalled(*, tenant: Tenant, actor: Actor) -> None:
    """Runs whose worker stopped stay "running" until someone asks for another: then they
    are failed, saying why."""
    stalled = EvaluationRun.objects.select_for_update(skip_locked=True).filter(
        state=EvaluationRunState.RUNNING, updated_at__lt=timezone.now() - STALLED_AFTER
    )
    for run in stalled:
        _finish(run, tenant=tenant, actor=actor, error=STALLED_ERROR)


STALLED_ERROR = "Its worker stopped: no progress for ten minutes. Nothing of its sandbox was kept."


def evaluation_run_open(
    *, tenant: Tenant, actor: Actor, scenario_set: ScenarioSet, against_cache: bool
) -> EvaluationRun:
    """A run started now in the foreground (``memoryconsole evaluate --tenant``), committed
    at once so the console shows it while it runs."""
    with tenant_scope(tenant.pk):
        return _run_create(
            tenant=tenant,
            actor=actor,
            scenario_set=scenario_set,
            against_cache=against_cache,
            state=EvaluationRunState.RUNNING,
            started_at=timezone.now(),
        )


def evaluation_run_claim(run_id: Any, *, tenant_id: Any) -> EvaluationRun | None:
    """Mark a queued run running, in a transaction of its own; None when another delivery
    has it (running and making progress) or it is finished. A run that stalled is claimed
    again."""
    stalled = timezone.now() - STALLED_AFTER
    with tenant_scope(tenant_id):
        run = EvaluationRun.objects.select_for_update(skip_locked=True).filter(pk=run_id).first()
        if run is None or run.finished:
            return None
        if (
            run.state == EvaluationRunState.RUNNING
            and (run.updated_at or run.requested_at) > stalled
        ):
            return None
        run.state = EvaluationRunState.RUNNING
        run.started_at = timezone.now()
        run.updated_at = run.started_at
        run.progress_done = 0
        run.save(update_fields=["state", "started_at", "updated_at", "progress_done"])
        return run


def _progress_writer(run: EvaluationRun, also: Progress | None) -> Progress:
    """Commit the run's progress (throttled), and pass it on to ``also``."""
    last = [0.0]

    def report(phase: str, done: int, total: int) -> None:
        if also is not None:
            also(phase, done, total)
        now = time.monotonic()
        if now - last[0] < PROGRESS_EVERY and done < total:
            return
        last[0] = now
        with tenant_scope(run.tenant_id):
            EvaluationRun.objects.filter(pk=run.pk).update(
                progress_phase=phase[:100],
                progress_done=done,
                progress_total=total,
                updated_at=timezone.now(),
            )

    return report


def _headline(results: dict[str, Any]) -> dict[str, Any]:
    """What the audit event keeps of the figures: the record's guarantees, and the outcome."""
    record = results.get("record") or {}
    decisions, residue = record.get("decisions") or {}, record.get("residue") or {}
    return {
        "decisions": decisions.get("decisions"),
        "decision_accuracy": decisions.get("decision_accuracy"),
        "wrong_scope_decisions": decisions.get("wrong_scope_decisions"),
        "residue_rate": residue.get("residue_rate"),
        "passed": results.get("passed"),
        "failed_thresholds": [t["name"] for t in results.get("thresholds", []) if not t["passed"]],
    }


def evaluation_run_execute(
    *, run: EvaluationRun, scenario_set: ScenarioSet | None = None, progress: Progress | None = None
) -> EvaluationRun:
    """Run ``run`` to its end, outside any transaction of the caller's (progress must be
    seen while it runs): the scenarios in a sandbox, the tenant's decisions at risk counted,
    the figures stored on the run and audited. A run that cannot finish is marked failed with
    the reason, also audited."""
    tenant = Tenant.objects.get(pk=run.tenant_id)
    actor = Actor(type=run.requested_by_type, id=run.requested_by_id, label=run.requested_by_label)
    try:
        scenario_set = scenario_set or scenarios_load()
        if scenario_set.digest != run.scenario_digest and run.scenario_digest:
            raise EvaluationFailed(
                "The shipped scenario set changed since this run was asked for; ask again."
            )
        policy = TenantPolicy.of(tenant)
        results = evaluate(
            scenario_set,
            policy=policy,
            against_cache=run.against_cache,
            progress=_progress_writer(run, progress),
        )
        with tenant_scope(tenant.pk):
            results["tenant"] = {
                "slug": tenant.slug,
                "decisions_at_risk": decisions_at_risk_count(),
            }
    except (EvaluationFailed, ScenarioError) as exc:
        return _finish(run, tenant=tenant, actor=actor, error=str(exc))
    except Exception as exc:
        logger.exception("evaluation run %s failed", run.pk)
        _finish(run, tenant=tenant, actor=actor, error=f"failed: {exc!r}")
        raise
    return _finish(run, tenant=tenant, actor=actor, results=results)


def _finish(
    run: EvaluationRun,
    *,
    tenant: Tenant,
    actor: Actor,
    results: dict[str, Any] | None = None,
    error: str = "",
) -> EvaluationRun:
    with tenant_scope(tenant.pk):
        locked = EvaluationRun.objects.select_for_update().get(pk=run.pk)
        locked.finished_at = timezone.now()
        locked.updated_at = locked.finished_at
        if results is not None:
            locked.state = EvaluationRunState.DONE
            locked.results = results
            locked.passed = bool(results.get("passed"))
            locked.progress_done = locked.progress_total or locked.progress_done
        else:
            locked.state = EvaluationRunState.FAILED
            locked.error = error[:2000]
        locked.save()
        audit_record(
            tenant=tenant,
            actor=actor,
            action="evaluation.run",
            object_type="evaluation_run",
            object_id=str(locked.pk),
            data=_headline(results) if results is not None else {"error": locked.error[:500]},
        )
    return locked
