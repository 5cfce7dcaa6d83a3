"""The console's deletion history (receipts, verify erasure) and erasures (confirm, queue, run)."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from apps.audit.models import AuditEvent, DeletionReceipt
from apps.core.actors import Actor
from apps.core.pagination import DAMAGED_LINK
from apps.governance import views as governance_views
from apps.governance.erasure_jobs import ERASURE_JOB, erasure_job_run
from apps.governance.models import ErasureJob, ErasureJobState
from apps.governance.services import legal_hold_place
from apps.records.models import Fact, MemoryRecord
from apps.tenancy.context import tenant_scope
from apps.tenancy.models import Tenant
from apps.work.models import OutboxMessage
from tests.derivations.support import RECORDS, drain, write
from tests.factories import DeletionReceiptFactory, ErasureJobFactory, bulk_save

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


def url(tenant: Tenant, name: str, **kwargs: Any) -> str:
    return reverse(f"console:{name}", kwargs={"tenant_slug": tenant.slug, **kwargs})


def make_receipts(tenant: Tenant, count: int, **fields: Any) -> list[DeletionReceipt]:
    """Receipts as a deletion leaves them (ids and counts only), one second apart."""
    now = timezone.now()
    values: dict[str, Any] = {"reason": "tidying up", "counts": {}, **fields}
    return bulk_save(
        [
            DeletionReceiptFactory.build(
                tenant=tenant, deleted_at=now - timedelta(seconds=i), **values
            )
            for i in range(count)
        ]
    )


def receipt_ids_on(html: str) -> list[str]:
    return re.findall(r'<tr id="receipt-([0-9a-f-]{36})"', html)


def nonce_in(html: str) -> str:
    match = re.search(r'name="nonce" value="([^"]+)"', html)
    assert match, "no nonce in the confirmation"
    return match.group(1)


def outbox_jobs(tenant: Tenant) -> list[OutboxMessage]:
    with tenant_scope(tenant.pk):
        return list(OutboxMessage.objects.filter(task_name=ERASURE_JOB))


def erasure_jobs(tenant: Tenant) -> list[ErasureJob]:
    with tenant_scope(tenant.pk):
        return list(ErasureJob.objects.all())


# --- deletion history -------------------------------------------------------------------------


def test_it_lists_receipts_newest_first_with_a_link_and_a_verify_button(client, tenant, auditor):
    receipts = make_receipts(tenant, 3)
    client.force_login(auditor)
    html = client.get(url(tenant, "deletions")).content.decode()
    assert receipt_ids_on(html) == [str(r.pk) for r in receipts]
    assert url(tenant, "deletion", receipt_id=receipts[0].pk) in html
    assert url(tenant, "deletion-verify", receipt_id=receipts[0].pk) in html


def test_it_shows_an_empty_state(client, tenant, owner):
    client.force_login(owner)
    assert "No deletions yet" in client.get(url(tenant, "deletions")).content.decode()


def test_it_pages_by_time_and_id_without_overlap(client, tenant, owner):
    receipts = make_receipts(tenant, 55)
    client.force_login(owner)
    first = client.get(url(tenant, "deletions")).content.decode()
    first_ids = receipt_ids_on(first)
    assert len(first_ids) == 50
    older = re.search(r'href="([^"]+)"[^>]*rel="next"', first)
    assert older
    second = client.get(older.group(1).replace("&amp;", "&")).content.decode()
    second_ids = receipt_ids_on(second)
    assert first_ids + second_ids == [str(r.pk) for r in receipts]
    assert 'rel="next"' not in second


def test_it_filters_by_kind_who_and_date(client, tenant, owner):
    make_receipts(tenant, 2)
    expiry = make_receipts(tenant, 1, kind="expiry", requested_by_label="system")[0]
    client.force_login(owner)
    assert receipt_ids_on(
        client.get(url(tenant, "deletions"), {"kind": "expiry"}).content.decode()
    ) == [str(expiry.pk)]
    by_who = client.get(url(tenant, "deletions"), {"who": "SYST"}).content.decode()
    assert receipt_ids_on(by_who) == [str(expiry.pk)]
    tomorrow = (timezone.now() + timedelta(days=1)).date().isoformat()
    later = client.get(url(tenant, "deletions"), {"since": tomorrow}).content.decode()
    assert receipt_ids_on(later) == []
    assert "No receipts match" in later


def test_it_refuses_an_end_date_before_the_start(client, tenant, owner):
    make_receipts(tenant, 1)
    client.force_login(owner)
    html = client.get(
        url(tenant, "deletions"), {"since": "2026-02-02", "until": "2026-01-01"}
    ).content.decode()
    assert "The end date is before the start date." in html
    assert receipt_ids_on(html) == []


def test_it_refuses_a_forged_cursor(client, tenant, owner):
    client.force_login(owner)
    html = client.get(url(tenant, "deletions"), {"before": "yesterday_x"}).content.decode()
    assert DAMAGED_LINK in html


def test_it_pages_through_the_deletions_newest_first_without_overlap(
    client, tenant, owner, admin_agent, monkeypatch
):
    monkeypatch.setattr(governance_views, "DELETIONS_PAGE_SIZE", 2)
    deleted = []
    for key in "abcde":
        record = write(admin_agent, subject="user:9", key=key)
        deleted.append(admin_agent.delete(f"{RECORDS}/{record['id']}", headers={}).json()["id"])
    client.force_login(owner)
    seen, page_url, pages = [], url(tenant, "deletions"), 0
    while page_url and pages < 10:
        response = client.get(page_url)
        seen += receipt_ids_on(response.content.decode())
        page_url, pages = response.context["older_url"], pages + 1
    assert pages == 3
    assert seen == deleted[::-1]


def test_it_hides_an_erasures_per_fact_receipts_until_asked(client, tenant, owner, admin_agent):
    for key in ("a", "b"):
        write(admin_agent, subject="user:5", key=key)
    body = admin_agent.post("/api/v1/erasures", {"subject": "user:5", "reason": "asked"}).json()
    client.force_login(owner)
    top = receipt_ids_on(client.get(url(tenant, "deletions")).content.decode())
    assert top == [body["id"]]
    children = receipt_ids_on(
        client.get(url(tenant, "deletions"), {"parent": body["id"]}).content.decode()
    )
    assert sorted(children) == sorted(body["receipts"])


def test_an_htmx_filter_returns_only_the_results(client, tenant, owner):
    make_receipts(tenant, 1)
    client.force_login(owner)
    html = client.get(url(tenant, "deletions"), {"kind": "record"}, headers=HTMX).content.decode()
    assert "<html" not in html
    assert html.lstrip().startswith('<section id="deletion-results"')


def test_the_list_costs_the_same_queries_for_few_or_many_receipts(client, tenant, owner):
    client.force_login(owner)
    make_receipts(tenant, 2)
    with CaptureQueriesContext(connection) as few:
        client.get(url(tenant, "deletions"))
    make_receipts(tenant, 40, kind="erasure", counts={"facts": 3, "records": 4})
    with CaptureQueriesContext(connection) as many:
        client.get(url(tenant, "deletions"))
    assert len(many.captured_queries) == len(few.captured_queries)


def test_the_receipt_page_shows_ids_and_counts_never_content(client, tenant, owner, admin_agent):
    record = write(admin_agent, value="the secret value", content="the secret value")
    receipt = admin_agent.delete(f"{RECORDS}/{record['id']}", headers={}).json()
    client.force_login(owner)
    html = client.get(url(tenant, "deletion", receipt_id=receipt["id"])).content.decode()
    assert record["id"] in html
    assert receipt["content_digest"] in html
    assert "the secret value" not in html


def test_verify_erasure_passes_for_a_clean_deletion(client, tenant, auditor, admin_agent):
    record = write(admin_agent)
    drain()
    receipt = admin_agent.delete(f"{RECORDS}/{record['id']}").json()
    client.force_login(auditor)
    response = client.get(url(tenant, "deletion-verify", receipt_id=receipt["id"]), headers=HTMX)
    html = response.content.decode()
    assert "<html" not in html
    assert "Passed." in html


def test_verify_erasure_names_what_is_still_there(client, tenant, owner, admin_agent):
    record = write(admin_agent)
    drain()
    receipt = make_receipts(tenant, 1, record_ids=[record["id"]])[0]
    client.force_login(owner)
    html = client.get(url(tenant, "deletion-verify", receipt_id=receipt.pk)).content.decode()
    assert "<html" in html  # without htmx: the receipt page with the result
    assert "Failed:" in html
    assert "still found." in html
    assert f"record {record['id']} still exists" in html


def test_a_check_that_fails_in_the_database_says_so(client, tenant, owner, monkeypatch):
    receipt = make_receipts(tenant, 1)[0]

    def failing_check(_receipt: Any) -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1 / 0")

    monkeypatch.setattr("apps.governance.views.erasure_verify", failing_check)
    client.force_login(owner)
    response = client.get(url(tenant, "deletion-verify", receipt_id=receipt.pk), headers=HTMX)
    assert response.status_code == 200
    assert "Not verified." in response.content.decode()


def test_another_tenants_receipt_is_not_found(client, tenant, other_tenant, owner):
    theirs = make_receipts(other_tenant, 1)[0]
    client.force_login(owner)
    assert client.get(url(tenant, "deletion", receipt_id=theirs.pk)).status_code == 404
    assert client.get(url(tenant, "deletion-verify", receipt_id=theirs.pk)).status_code == 404


@pytest.mark.parametrize("persona", ["member", "reviewer"])
def test_deletions_need_the_audit_permission(client, tenant, persona, request):
    receipt = make_receipts(tenant, 1)[0]
    client.force_login(request.getfixturevalue(persona))
    assert client.get(url(tenant, "deletions")).status_code == 403
    assert client.get(url(tenant, "deletion", receipt_id=receipt.pk)).status_code == 403
    assert client.get(url(tenant, "deletion-verify", receipt_id=receipt.pk)).status_code == 403


def test_an_outsider_gets_404(client, tenant, outsider):
    client.force_login(outsider)
    assert client.get(url(tenant, "deletions")).status_code == 404
    assert client.get(url(tenant, "erasures")).status_code == 404


# --- erasures ---------------------------------------------------------------------------------


def ask(client: Any, tenant: Tenant, **data: str) -> str:
    response = client.post(url(tenant, "erasures"), data)
    assert response.status_code == 200
    return response.content.decode()


def test_the_confirmation_counts_what_would_go_and_changes_nothing(
    client, tenant, owner, admin_agent
):
    write(admin_agent, subject="user:7", key="a")
    write(admin_agent, subject="user:7", key="a", value="v2", source__ref="interaction:2")
    write(admin_agent, subject="user:7", key="b")
    write(admin_agent, subject="user:8", key="a")
    client.force_login(owner)
    html = ask(client, tenant, selector="subject", value="user:7", reason="GDPR art. 17")
    assert "<strong>2</strong> facts will be erased" in html
    assert "3 records match" in html
    assert "Erase 2 facts" in html
    with tenant_scope(tenant.pk):
        assert MemoryRecord.objects.count() == 4
        assert not AuditEvent.objects.filter(action__startswith="erasure").exists()
    assert outbox_jobs(tenant) == []


def test_the_confirmation_counts_facts_kept_by_a_hold(client, tenant, owner, admin_agent):
    write(admin_agent, subject="user:7", key="a")
    write(admin_agent, subject="user:7", key="b")
    with tenant_scope(tenant.pk):
        legal_hold_place(
            tenant=tenant,
            actor=Actor.system("tests"),
            reason="litigation",
            fact=Fact.objects.get(key="a"),
        )
    client.force_login(owner)
    html = ask(client, tenant, selector="subject", value="user:7", reason="asked")
    assert "<strong>1</strong> fact will be erased" in html
    assert "<strong>1</strong> fact under a legal hold will be kept" in html


def test_nothing_matching_offers_no_button(client, tenant, owner):
    client.force_login(owner)
    html = ask(client, tenant, selector="owner", value="service:none", reason="asked")
    assert "there is nothing to erase" in html
    assert "erasure-start" not in html


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ({"selector": "subject", "value": "user:1", "reason": "  "}, "This field is required."),
        ({"selector": "subject", "value": "", "reason": "x"}, "This field is required."),
        ({"selector": "colour", "value": "user:1", "reason": "x"}, "Select a valid choice"),
        ({"selector": "subject", "value": "u" * 201, "reason": "x"}, "at most 200 characters"),
    ],
)
def test_bad_input_is_an_error_and_changes_nothing(client, tenant, owner, data, error):
    client.force_login(owner)
    response = client.post(url(tenant, "erasures"), data, headers=HTMX)
    html = response.content.decode()
    assert error in html
    assert "<html" not in html
    start = client.post(url(tenant, "erasure-start"), {**data, "records": "1", "nonce": "n"})
    assert error in start.content.decode()
    assert outbox_jobs(tenant) == []


def confirm(client: Any, tenant: Tenant, **data: str) -> tuple[dict[str, str], Any]:
    html = ask(client, tenant, **data)
    records = re.search(r'name="records" value="(\d+)"', html)
    assert records
    fields = {**data, "records": records.group(1), "nonce": nonce_in(html)}
    return fields, client.post(url(tenant, "erasure-start"), fields)


def test_a_confirmed_erasure_is_queued_run_by_the_worker_and_shows_its_receipt(
    client, tenant, owner, admin_agent
):
    for key in ("a", "b", "c"):
        write(admin_agent, subject="user:9", key=key)
    kept = write(admin_agent, subject="user:10")
    client.force_login(owner)
    _, response = confirm(client, tenant, selector="subject", value="user:9", reason="asked")
    [job] = erasure_jobs(tenant)
    [message] = outbox_jobs(tenant)
    assert message.payload == {"job_id": str(job.pk)}  # ids only
    assert response.status_code == 302
    assert response["Location"] == url(tenant, "erasure-job", job_id=job.pk)
    with tenant_scope(tenant.pk):
        requested = AuditEvent.objects.get(action="erasure.request")
        assert requested.object_id == str(job.pk)
        # The event names its target (an identifier, never content), as every transition does.
        assert requested.data["target"] == {"subject": "user:9"}
        # Acknowledged but not run yet: nothing is gone, and the page says it is queued.
        assert MemoryRecord.objects.filter(subject="user:9").count() == 3
    queued = client.get(url(tenant, "erasure-job", job_id=job.pk), headers=HTMX).content.decode()
    assert "<html" not in queued
    assert "Queued" in queued
    assert 'hx-trigger="every 2s"' in queued

    drain()

    done = client.get(url(tenant, "erasure-job", job_id=job.pk)).content.decode()
    assert "Erased." in done
    assert 'hx-trigger="every 2s"' not in done
    with tenant_scope(tenant.pk):
        assert not MemoryRecord.objects.filter(subject="user:9").exists()
        assert MemoryRecord.objects.filter(pk=kept["id"]).exists()
        parent = DeletionReceipt.objects.get(kind="erasure")
        assert parent.counts["facts"] == 3
        assert DeletionReceipt.objects.filter(parent=parent).count() == 3
        job.refresh_from_db()
        assert job.state == ErasureJobState.DONE
        assert job.receipt_id == parent.pk
        # The identifier erased by is not kept beside the receipt.
        assert job.value == ""
    assert str(parent.pk) in done
    assert '<dt title="facts">Facts</dt> <dd>3</dd>' in done
    listed = client.get(url(tenant, "erasures")).content.decode()
    assert url(tenant, "erasure-job", job_id=job.pk) in listed
    assert "3 facts, 3 records" in listed


def test_a_double_submitted_erasure_is_queued_once(client, tenant, owner, admin_agent):
    write(admin_agent, subject="user:9")
    client.force_login(owner)
    fields, first = confirm(client, tenant, selector="subject", value="user:9", reason="asked")
    again = client.post(url(tenant, "erasure-start"), fields, headers=HTMX)
    assert first.status_code == 302
    assert again["HX-Redirect"] == url(tenant, "erasures")
    assert len(outbox_jobs(tenant)) == 1


def test_a_redelivered_job_does_nothing_once_done(client, tenant, owner, admin_agent):
    write(admin_agent, subject="user:9")
    client.force_login(owner)
    confirm(client, tenant, selector="subject", value="user:9", reason="asked")
    [job] = outbox_jobs(tenant)
    payload = dict(job.payload)
    drain()
    with tenant_scope(tenant.pk):
        outcome = erasure_job_run(**payload, outbox_id=str(job.pk))
        assert outcome == "already finished"
        assert DeletionReceipt.objects.filter(kind="erasure").count() == 1


def test_another_tenants_job_is_not_found(client, tenant, other_tenant, owner, outsider):
    theirs = ErasureJobFactory(tenant=other_tenant, reason="theirs", requested_by_label="")
    client.force_login(owner)
    assert client.get(url(tenant, "erasure-job", job_id=theirs.pk)).status_code == 404


@pytest.mark.parametrize("persona", ["auditor", "reviewer", "member"])
def test_erasures_need_the_erase_permission(client, tenant, persona, request, admin_agent):
    write(admin_agent, subject="user:9")
    client.force_login(request.getfixturevalue(persona))
    data = {"selector": "subject", "value": "user:9", "reason": "x", "records": "1", "nonce": "n"}
    # An auditor reads the erasures' history; nobody but an admin may start one.
    expected = 200 if persona == "auditor" else 403
    assert client.get(url(tenant, "erasures")).status_code == expected
    assert client.post(url(tenant, "erasures"), data).status_code == 403
    assert client.post(url(tenant, "erasure-start"), data).status_code == 403
    assert outbox_jobs(tenant) == []


def test_a_job_a_worker_picked_up_shows_as_running(client, tenant, owner, admin_agent):
    write(admin_agent, subject="user:9")
    client.force_login(owner)
    confirm(client, tenant, selector="subject", value="user:9", reason="asked")
    [job] = erasure_jobs(tenant)
    with tenant_scope(tenant.pk):
        ErasureJob.objects.filter(pk=job.pk).update(
            state=ErasureJobState.RUNNING, started_at=timezone.now()
        )
    html = client.get(url(tenant, "erasure-job", job_id=job.pk), headers=HTMX).content.decode()
    assert "Running" in html
    assert "Erasing 1 record in batches" in html
    assert 'hx-trigger="every 2s"' in html


def test_the_worker_notes_when_it_started(client, tenant, owner, admin_agent):
    write(admin_agent, subject="user:9")
    client.force_login(owner)
    confirm(client, tenant, selector="subject", value="user:9", reason="asked")
    drain()
    [job] = erasure_jobs(tenant)
    assert job.started_at is not None
    assert job.finished_at is not None
    assert job.started_at <= job.finished_at


def test_the_erasures_page_costs_the_same_queries_for_few_or_many_jobs(
    client, tenant, owner, admin_agent
):
    client.force_login(owner)
    write(admin_agent, subject="user:0")
    confirm(client, tenant, selector="subject", value="user:0", reason="asked")
    with CaptureQueriesContext(connection) as few:
        client.get(url(tenant, "erasures"))
    for index in range(1, 6):
        write(admin_agent, subject=f"user:{index}")
        confirm(client, tenant, selector="subject", value=f"user:{index}", reason="asked")
    drain()
    with CaptureQueriesContext(connection) as many:
        html = client.get(url(tenant, "erasures")).content.decode()
    assert html.count("erasures/") >= 6
    assert len(many.captured_queries) == len(few.captured_queries)
