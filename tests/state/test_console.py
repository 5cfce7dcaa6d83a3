"""The console's runs and obligations page: lists, filters, overdue marking, keyset pages."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from apps.core.actors import Actor
from apps.state.models import Obligation, Run
from apps.state.services import (
    checkpoint_write,
    obligation_commit,
    obligation_create,
    run_close,
    run_open,
)
from apps.state.views import PAGE_SIZE
from apps.tenancy.context import tenant_scope
from apps.tenancy.models import Tenant

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}
AGENT = Actor("credential", "bot-1", "checkout-bot")


def runs_url(tenant: Tenant) -> str:
    return reverse("console:runs", kwargs={"tenant_slug": tenant.slug})


def signed_in(client: Client, user: Any) -> Client:
    client.force_login(user)
    return client


def a_run(tenant: Tenant, task_id: str = "task-1", steps: int = 0) -> Run:
    with tenant_scope(tenant.pk):
        run = run_open(tenant=tenant, task_id=task_id, owner="service:checkout", actor=AGENT)
        for step in range(steps):
            checkpoint_write(run=run, step=step, state={"done": step}, actor=AGENT)
        return run


def an_obligation(
    tenant: Tenant, key: str, *, task_id: str = "task-1", deadline_in: timedelta | None = None
) -> Obligation:
    with tenant_scope(tenant.pk):
        outcome = obligation_create(
            tenant=tenant, task_id=task_id, kind="charge", key=key, actor=AGENT
        )
        obligation = outcome.obligation
        if deadline_in is not None:
            # Set directly: the service refuses nothing here, but a deadline already past
            # is the point of the test.
            Obligation.objects.filter(pk=obligation.pk).update(
                deadline=timezone.now() + deadline_in
            )
            obligation.refresh_from_db()
        return obligation


# --- access ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("persona", ["owner", "reviewer", "member", "auditor"])
def test_it_shows_the_page_to_every_role(client, tenant, persona, request):
    user = request.getfixturevalue(persona)
    response = signed_in(client, user).get(runs_url(tenant))
    assert response.status_code == 200
    assert "Runs &amp; obligations" in response.content.decode()


def test_it_hides_the_tenant_from_an_outsider(client, tenant, outsider):
    assert signed_in(client, outsider).get(runs_url(tenant)).status_code == 404


def test_it_sends_an_anonymous_visitor_to_sign_in(client, tenant):
    assert client.get(runs_url(tenant)).status_code == 302


def test_it_shows_only_the_tenants_own_runs(client, tenant, other_tenant, owner, outsider):
    a_run(other_tenant, task_id="rival-task")
    an_obligation(other_tenant, "rival-key")
    a_run(tenant, task_id="own-task")
    html = signed_in(client, owner).get(runs_url(tenant)).content.decode()
    assert "own-task" in html
    assert "rival-task" not in html
    assert "rival-key" not in html


# --- runs -----------------------------------------------------------------------------------------


def test_it_lists_runs_with_their_latest_checkpoint(client, tenant, member):
    a_run(tenant, task_id="with-steps", steps=3)
    a_run(tenant, task_id="no-steps")
    response = signed_in(client, member).get(runs_url(tenant))
    steps = {run.task_id: run.latest_step for run in response.context["runs"].rows}
    assert steps == {"with-steps": 2, "no-steps": None}
    html = response.content.decode()
    assert "step 2" in html
    assert "none yet" in html


def test_it_filters_runs_by_state_and_task(client, tenant, member):
    closed = a_run(tenant, task_id="done-task")
    with tenant_scope(tenant.pk):
        run_close(run=closed, actor=AGENT)
    a_run(tenant, task_id="live-task")
    signed_in(client, member)
    open_runs = client.get(runs_url(tenant), {"run_state": "open"}).context["runs"].rows
    assert [run.task_id for run in open_runs] == ["live-task"]
    closed_runs = client.get(runs_url(tenant), {"run_state": "closed"}).context["runs"].rows
    assert [run.task_id for run in closed_runs] == ["done-task"]
    by_task = client.get(runs_url(tenant), {"task_id": "done-task"}).context["runs"].rows
    assert [run.state for run in by_task] == ["closed"]


def test_it_pages_runs_by_keyset(client, tenant, member):
    for index in range(PAGE_SIZE + 3):
        a_run(tenant, task_id=f"task-{index:02d}")
    signed_in(client, member)
    first = client.get(runs_url(tenant)).context["runs"]
    assert len(first.rows) == PAGE_SIZE
    assert first.next_url
    second = client.get(first.next_url).context["runs"]
    assert len(second.rows) == 3
    assert second.next_url is None
    seen = [run.pk for run in first.rows] + [run.pk for run in second.rows]
    assert len(set(seen)) == PAGE_SIZE + 3


# --- obligations ----------------------------------------------------------------------------------


def test_it_marks_overdue_obligations_in_words(client, tenant, member):
    an_obligation(tenant, "late-key", deadline_in=timedelta(hours=-2))
    an_obligation(tenant, "future-key", deadline_in=timedelta(days=2))
    an_obligation(tenant, "no-deadline-key")
    response = signed_in(client, member).get(runs_url(tenant))
    overdue = {row.obligation.key: row.overdue for row in response.context["obligations"].rows}
    assert overdue == {"late-key": True, "future-key": False, "no-deadline-key": False}
    assert [item.key for item in response.context["overdue"]] == ["late-key"]
    html = response.content.decode()
    assert html.count('class="flag flag-overdue">Overdue<') == 2  # the panel and the row
    assert 'class="row-overdue"' in html


def test_it_does_not_call_a_committed_obligation_overdue(client, tenant, member):
    late = an_obligation(tenant, "paid-key", deadline_in=timedelta(hours=-1))
    with tenant_scope(tenant.pk):
        obligation_commit(obligation=late, result={"ok": True}, actor=AGENT)
    response = signed_in(client, member).get(runs_url(tenant))
    assert response.context["overdue"] == []
    assert [row.overdue for row in response.context["obligations"].rows] == [False]


def test_it_filters_obligations_by_state_task_and_overdue(client, tenant, member):
    an_obligation(tenant, "a-late", task_id="alpha", deadline_in=timedelta(hours=-1))
    an_obligation(tenant, "a-fine", task_id="alpha")
    committed = an_obligation(tenant, "b-done", task_id="beta")
    with tenant_scope(tenant.pk):
        obligation_commit(obligation=committed, result={}, actor=AGENT)
    signed_in(client, member)

    def keys(**query: str) -> set[str]:
        rows = client.get(runs_url(tenant), query).context["obligations"].rows
        return {row.obligation.key for row in rows}

    assert keys(state="committed") == {"b-done"}
    assert keys(task_id="alpha") == {"a-late", "a-fine"}
    assert keys(overdue="on") == {"a-late"}
    assert keys(state="pending", task_id="beta") == set()


def test_it_pages_obligations_by_keyset(client, tenant, member):
    for index in range(PAGE_SIZE + 2):
        an_obligation(tenant, f"key-{index:02d}")
    signed_in(client, member)
    first = client.get(runs_url(tenant)).context["obligations"]
    second = client.get(first.next_url).context["obligations"]
    seen = {row.obligation.key for row in first.rows} | {row.obligation.key for row in second.rows}
    assert len(seen) == PAGE_SIZE + 2
    assert second.next_url is None


# --- bad input, htmx, query count -----------------------------------------------------------------


def test_it_explains_a_bad_filter_and_lists_nothing(client, tenant, member):
    a_run(tenant)
    response = signed_in(client, member).get(runs_url(tenant), {"state": "exploded"})
    assert response.status_code == 200
    assert "runs" not in response.context
    html = response.content.decode()
    assert "Check the filters" in html
    assert "Select a valid choice" in html


def test_it_refuses_a_damaged_page_link(client, tenant, member):
    response = signed_in(client, member).get(runs_url(tenant), {"runs_after": "not-a-cursor"})
    assert "This page link is damaged" in response.content.decode()


def test_it_answers_htmx_with_the_results_only(client, tenant, member):
    a_run(tenant, task_id="partial-task")
    response = signed_in(client, member).get(runs_url(tenant), headers=HTMX)
    html = response.content.decode()
    assert "<html" not in html
    assert 'id="runs-results"' in html
    assert "partial-task" in html


def test_it_reads_the_page_in_a_fixed_number_of_queries(client, tenant, member):
    a_run(tenant, steps=1)
    an_obligation(tenant, "one", deadline_in=timedelta(hours=-1))
    signed_in(client, member)
    client.get(runs_url(tenant))  # the first request of a session writes it
    with CaptureQueriesContext(connection) as few:
        client.get(runs_url(tenant))
    for index in range(PAGE_SIZE + 5):
        a_run(tenant, task_id=f"more-{index}", steps=2)
        an_obligation(tenant, f"more-{index}", deadline_in=timedelta(hours=-1))
    with CaptureQueriesContext(connection) as many:
        client.get(runs_url(tenant))
    assert len(few.captured_queries) > 3, "the page's own queries were captured"
    assert len(many.captured_queries) == len(few.captured_queries)
