"""A large erasure is a job, whichever door asked for it: the API answers 202 with the job's
URL, and the job (a model of its own) is the one the console shows."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from apps.records.models import MemoryRecord
from apps.tenancy.context import tenant_scope
from tests.api.support import assert_problem
from tests.conftest import make_agent
from tests.derivations.support import drain, write
from tests.factories import OutboxMessageFactory

from .test_console import confirm

pytestmark = pytest.mark.django_db

ERASURES = "/api/v1/erasures"


@pytest.fixture
def low_threshold(settings):
    settings.ERASURE_JOB_THRESHOLD_RECORDS = 2


def records_of(tenant, subject):
    with tenant_scope(tenant.pk):
        return MemoryRecord.objects.filter(subject=subject).count()


def test_a_large_erasure_is_a_job_with_a_url(low_threshold, admin_agent, tenant):
    for key in ("a", "b", "c"):
        write(admin_agent, subject="user:1", key=key)
    response = admin_agent.post(ERASURES, {"subject": "user:1", "reason": "GDPR art. 17"})
    assert response.status_code == 202, response.content
    body = response.json()
    assert response["Location"] == body["url"]
    assert body["url"] == f"{ERASURES}/{body['id']}"
    assert body["state"] == "queued"
    assert body["progress"]["records_matched"] == 3
    assert records_of(tenant, "user:1") == 3
    waiting = admin_agent.get(body["url"]).json()
    assert waiting["state"] == "queued"
    assert waiting["totals"] is None
    assert waiting["receipt"] is None

    drain()
    done = admin_agent.get(body["url"])
    assert done.status_code == 200
    job = done.json()
    assert job["state"] == "done"
    assert job["totals"]["facts"] == 3
    assert job["totals"]["records"] == 3
    assert job["progress"] == {"records_matched": 3, "records_erased": 3}
    assert job["receipt"]["kind"] == "erasure"
    assert job["requested_by"]["label"] == "admin-bot"
    assert job["reason"] == "GDPR art. 17"
    assert job["finished_at"]
    assert "user:1" not in done.content.decode()
    assert records_of(tenant, "user:1") == 0


def test_a_small_erasure_still_answers_at_once(low_threshold, admin_agent, tenant):
    write(admin_agent, subject="user:1")
    response = admin_agent.post(ERASURES, {"subject": "user:1", "reason": "asked"})
    assert response.status_code == 200
    assert response.json()["totals"]["records"] == 1


def test_the_job_is_a_model_of_its_own(low_threshold, admin_agent, tenant):
    from apps.governance.models import ErasureJob

    for key in ("a", "b", "c"):
        write(admin_agent, subject="user:1", key=key)
    body = admin_agent.post(ERASURES, {"subject": "user:1", "reason": "asked"}).json()
    with tenant_scope(tenant.pk):
        job = ErasureJob.objects.get(pk=body["id"])
        assert job.state == "queued"
        assert job.reason == "asked"
        assert job.requested_by_label == "admin-bot"


def test_the_console_shows_the_apis_job_and_the_api_the_consoles(
    low_threshold, client, admin_agent, tenant, owner
):
    for key in ("a", "b", "c"):
        write(admin_agent, subject="user:1", key=key)
        write(admin_agent, subject="user:2", key=key)
    api_job = admin_agent.post(ERASURES, {"subject": "user:1", "reason": "asked"}).json()
    client.force_login(owner)
    page = reverse(
        "console:erasure-job", kwargs={"tenant_slug": tenant.slug, "job_id": api_job["id"]}
    )
    assert client.get(page).status_code == 200
    _, response = confirm(client, tenant, selector="subject", value="user:2", reason="asked")
    console_job_id = response["Location"].rstrip("/").rsplit("/", 1)[-1]
    from_api = admin_agent.get(f"{ERASURES}/{console_job_id}")
    assert from_api.status_code == 200
    assert from_api.json()["state"] == "queued"


def test_the_consoles_job_page_names_what_it_erases(low_threshold, client, admin_agent, owner):
    for key in ("a", "b", "c"):
        write(admin_agent, subject="user:1", key=key)
    job = admin_agent.post(ERASURES, {"subject": "user:1", "reason": "asked"}).json()
    client.force_login(owner)
    page = reverse(
        "console:erasure-job", kwargs={"tenant_slug": admin_agent.tenant.slug, "job_id": job["id"]}
    )
    assert re.search(r"<h1>Erasure by subject <span[^>]*>user:1</span></h1>", client.get(page).text)
    drain()
    # Once erased, the identifier is not kept (the receipt keeps a digest): the page says so.
    done = client.get(page).text
    assert "user:1" not in done
    assert "no longer kept once the erasure commits" in done


def test_another_tenants_job_is_not_found(low_threshold, admin_agent, other_tenant):
    for key in ("a", "b", "c"):
        write(admin_agent, subject="user:1", key=key)
    job = admin_agent.post(ERASURES, {"subject": "user:1", "reason": "asked"}).json()
    theirs = make_agent(other_tenant, "erase,audit", name="theirs")
    assert_problem(theirs.get(f"{ERASURES}/{job['id']}"), 404)
    assert_problem(theirs.get(f"{ERASURES}/not-a-uuid"), 404)


def test_reading_a_job_needs_erase_or_audit(low_threshold, admin_agent, tenant):
    for key in ("a", "b", "c"):
        write(admin_agent, subject="user:1", key=key)
    job = admin_agent.post(ERASURES, {"subject": "user:1", "reason": "asked"}).json()
    assert_problem(make_agent(tenant, "read", name="r").get(job["url"]), 403)
    assert make_agent(tenant, "audit", name="a").get(job["url"]).status_code == 200
    assert make_agent(tenant, "erase", name="e").get(job["url"]).status_code == 200


def test_jobs_kept_in_outbox_payloads_are_migrated(admin_agent, tenant):
    """Before ErasureJob, a console erasure lived in its outbox row's payload."""
    import importlib
    from types import SimpleNamespace

    from django.db import connection
    from django.db.migrations.loader import MigrationLoader
    from django.utils import timezone

    from apps.governance.erasure_jobs import ERASURE_JOB
    from apps.governance.models import ErasureJob
    from apps.work.models import OutboxMessage, OutboxState

    migration = importlib.import_module("apps.derivations.migrations.0006_erasure_job")
    write(admin_agent, subject="user:7")
    pending = OutboxMessageFactory(
        tenant=tenant,
        task_name=ERASURE_JOB,
        object_id="00000000-0000-0000-0000-000000000007",
        payload={
            "selector": "subject",
            "value": "user:7",
            "reason": "asked",
            "actor_type": "user",
            "actor_id": "1",
            "actor_label": "olivia",
            "records": 1,
            "requested_at": timezone.now().isoformat(),
        },
    )
    finished = OutboxMessageFactory(
        tenant=tenant,
        task_name=ERASURE_JOB,
        state=OutboxState.DONE,
        payload={"selector": "owner", "actor_label": "olivia", "totals": {"records": 4}},
        finished_at=timezone.now(),
    )
    # The models as that migration knew them (ErasureJob was derivations' then).
    state = MigrationLoader(connection).project_state(("derivations", "0006_erasure_job"))
    migration.jobs_out_of_the_outbox(state.apps, SimpleNamespace(connection=connection))
    with tenant_scope(tenant.pk):
        queued = ErasureJob.objects.get(pk=pending.pk)
        assert (queued.state, queued.value, queued.reason) == ("queued", "user:7", "asked")
        assert OutboxMessage.objects.get(pk=pending.pk).payload == {"job_id": str(pending.pk)}
        done = ErasureJob.objects.get(pk=finished.pk)
        assert (done.state, done.totals, done.value) == ("done", {"records": 4}, "")
    drain()
    with tenant_scope(tenant.pk):
        assert ErasureJob.objects.get(pk=pending.pk).state == "done"
    assert records_of(tenant, "user:7") == 0
