"""The console's Evaluation page (runs, figures, plots, starting a run) and Decisions at risk."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse
from django.utils import timezone

from apps.audit.models import AuditEvent
from apps.evaluation.models import EvaluationRun, EvaluationRunState
from apps.evaluation.services import EVALUATION_RUN
from apps.tenancy.context import tenant_scope
from apps.tenancy.models import Tenant
from apps.work.models import OutboxMessage
from tests.factories import EvaluationRunFactory
from tests.records.factories import body

from .conftest import fake_results
from .support import decide, remember

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


def url(tenant: Tenant, name: str, **kwargs: Any) -> str:
    return reverse(f"console:{name}", kwargs={"tenant_slug": tenant.slug, **kwargs})


def a_run(tenant: Tenant, **fields: Any) -> EvaluationRun:
    return EvaluationRunFactory(
        tenant=tenant, requested_by_type="user", requested_by_label="olivia", **fields
    )


def test_it_shows_past_runs_with_the_latest_figures_and_plots(client, owner, tenant):
    a_run(
        tenant,
        state=EvaluationRunState.DONE,
        results=fake_results(),
        passed=True,
        finished_at=timezone.now(),
    )
    client.force_login(owner)
    page = client.get(url(tenant, "evaluation")).content.decode()
    assert "Run the scenario set" in page
    assert "Passed" in page
    assert "wrong-scope applications" in page
    assert page.count("<svg") == 3
    assert 'role="img"' in page


def test_an_auditor_sees_the_runs_but_cannot_start_one(client, auditor, tenant):
    client.force_login(auditor)
    page = client.get(url(tenant, "evaluation"))
    assert page.status_code == 200
    assert "Run the scenario set" not in page.content.decode()
    assert client.post(url(tenant, "evaluation-start"), {"against_cache": "on"}).status_code == 403
    with tenant_scope(tenant.pk):
        assert not EvaluationRun.objects.exists()


def test_members_may_not_open_it_and_outsiders_do_not_find_it(client, member, outsider, tenant):
    client.force_login(member)
    assert client.get(url(tenant, "evaluation")).status_code == 403
    client.force_login(outsider)
    assert client.get(url(tenant, "evaluation")).status_code == 404
    run = a_run(tenant)
    assert client.get(url(tenant, "evaluation-run", run_id=run.pk)).status_code == 404


def test_starting_a_run_queues_it_for_the_worker_and_audits_it(client, owner, tenant):
    client.force_login(owner)
    response = client.post(url(tenant, "evaluation-start"), {"against_cache": "on"})
    with tenant_scope(tenant.pk):
        run = EvaluationRun.objects.get()
        assert OutboxMessage.objects.filter(task_name=EVALUATION_RUN, object_id=run.pk).exists()
        assert AuditEvent.objects.filter(
            action="evaluation.request", object_id=str(run.pk)
        ).exists()
    assert response.status_code == 302
    assert response["Location"] == url(tenant, "evaluation-run", run_id=run.pk)
    assert run.against_cache is True
    assert run.state == EvaluationRunState.QUEUED


def test_a_running_run_polls_its_progress_and_stops_polling_when_done(client, owner, tenant):
    run = a_run(
        tenant,
        state=EvaluationRunState.RUNNING,
        progress_phase="deciding (record)",
        progress_done=30,
        progress_total=120,
    )
    client.force_login(owner)
    fragment = client.get(
        url(tenant, "evaluation-run", run_id=run.pk), headers=HTMX
    ).content.decode()
    assert 'hx-trigger="every 2s"' in fragment
    assert "deciding (record): step 30 of 120" in fragment
    assert 'value="25"' in fragment
    with tenant_scope(tenant.pk):
        EvaluationRun.objects.filter(pk=run.pk).update(
            state=EvaluationRunState.DONE,
            results=fake_results(passed=False),
            passed=False,
            finished_at=timezone.now(),
        )
    fragment = client.get(
        url(tenant, "evaluation-run", run_id=run.pk), headers=HTMX
    ).content.decode()
    assert "every 2s" not in fragment
    assert "Threshold failed" in fragment
    assert "FAIL" in fragment


def test_a_failed_run_says_why(client, owner, tenant):
    run = a_run(
        tenant, state=EvaluationRunState.FAILED, error="agent: POST /api/v1/records answered 400"
    )
    client.force_login(owner)
    page = client.get(url(tenant, "evaluation-run", run_id=run.pk)).content.decode()
    assert "could not finish" in page
    assert "answered 400" in page


def test_decisions_at_risk_lists_them_linked_to_memory_change_and_audit(
    client, reviewer, owner, tenant, writer
):
    kept = remember(writer, tenant, "kept.preference")
    gone = remember(writer, tenant, "gone.preference")
    decide(writer, "preference")
    writer.delete(f"/api/v1/records/{gone}")
    writer.post("/api/v1/records", body(key="kept.preference", subject="user:1", value="carrier_z"))
    client.force_login(owner)
    page = client.get(url(tenant, "decisions-at-risk")).content.decode()
    assert gone in page
    assert kept in page
    assert url(tenant, "memory", record_id=kept) in page  # still stored: linked
    assert "deleted or erased" in page
    assert "contradicted (open conflict)" in page
    assert (
        reverse("console:audit", kwargs={"tenant_slug": tenant.slug}) + "?action=search.decision"
        in page
    )
    assert "/deletions/" in page  # the receipt of the deletion
    client.force_login(reviewer)
    filtered = client.get(url(tenant, "decisions-at-risk"), {"change": "deleted"}, headers=HTMX)
    assert filtered.status_code == 200
    html = filtered.content.decode()
    assert gone in html
    assert kept not in html
    assert "<html" not in html  # the partial only
    assert "/deletions/" not in html  # a reviewer does not see receipts: no link


def test_decisions_at_risk_refuse_bad_filters_and_other_roles(
    client, member, auditor, outsider, tenant
):
    client.force_login(auditor)
    page = client.get(url(tenant, "decisions-at-risk"), {"memory": "nope", "cursor": "x"})
    assert page.status_code == 200
    assert "Check the filters" in page.content.decode()
    client.force_login(member)
    assert client.get(url(tenant, "decisions-at-risk")).status_code == 403
    client.force_login(outsider)
    assert client.get(url(tenant, "decisions-at-risk")).status_code == 404


def test_the_navigation_offers_both_pages_to_whom_they_serve(
    client, reviewer, auditor, member, tenant
):
    def links(person: Any) -> set[str]:
        client.force_login(person)
        nav = client.get(url(tenant, "dashboard")).content.decode()
        return {
            name
            for name in ("decisions-at-risk", "evaluation")
            if f'href="{url(tenant, name)}"' in nav
        }

    assert links(reviewer) == {"decisions-at-risk"}
    assert links(auditor) == {"decisions-at-risk", "evaluation"}
    assert links(member) == set()
