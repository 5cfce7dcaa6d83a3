"""Who may erase: tenant-wide erasure is an admin's; auditors read and verify deletion
history (erasure jobs included); members delete single records they can see. Credentials
alike: ``erase`` for /erasures, ``audit`` for receipts, ``delete`` for one record."""

from __future__ import annotations

import pytest

from apps.governance.erasure_jobs import ERASURE_JOB
from apps.tenancy.context import tenant_scope
from apps.work.models import OutboxMessage
from tests.conftest import make_agent
from tests.derivations.support import RECORDS, write

from .test_console import confirm, url

pytestmark = pytest.mark.django_db

ERASE = {"selector": "subject", "value": "user:9", "reason": "asked"}


def queued(tenant):
    with tenant_scope(tenant.pk):
        return OutboxMessage.objects.filter(task_name=ERASURE_JOB).count()


@pytest.mark.parametrize("persona", ["member", "auditor", "reviewer"])
def test_only_an_admin_may_start_a_tenant_wide_erasure(client, tenant, persona, request):
    client.force_login(request.getfixturevalue(persona))
    assert client.post(url(tenant, "erasures"), ERASE).status_code == 403
    start = client.post(url(tenant, "erasure-start"), {**ERASE, "records": "1", "nonce": "n"})
    assert start.status_code == 403
    assert queued(tenant) == 0


def test_a_member_sees_no_erasure_page(client, tenant, member):
    client.force_login(member)
    assert client.get(url(tenant, "erasures")).status_code == 403
    assert "Erasures" not in client.get(url(tenant, "memories")).content.decode()


def test_an_admin_erases(client, tenant, owner, admin_agent):
    write(admin_agent, subject="user:9")
    client.force_login(owner)
    _, response = confirm(client, tenant, **ERASE)
    assert response.status_code == 302
    assert queued(tenant) == 1


def test_an_auditor_follows_erasures_without_the_form(client, tenant, owner, auditor, admin_agent):
    write(admin_agent, subject="user:9")
    client.force_login(owner)
    _, response = confirm(client, tenant, **ERASE)
    job_url = response["Location"]
    client.force_login(auditor)
    page = client.get(url(tenant, "erasures"))
    assert page.status_code == 200
    html = page.content.decode()
    assert "Recent erasures" in html
    assert "Count what it would erase" not in html
    assert client.get(job_url).status_code == 200
    assert "Erasures" in client.get(url(tenant, "deletions")).content.decode()


def test_a_member_still_deletes_a_single_record(client, tenant, member, admin_agent):
    record = write(admin_agent, subject="user:9")
    client.force_login(member)
    page = client.get(reverse_delete(tenant, record["id"]))
    assert page.status_code == 200


def reverse_delete(tenant, record_id):
    from django.urls import reverse

    return reverse(
        "console:memory-delete", kwargs={"tenant_slug": tenant.slug, "record_id": record_id}
    )


def test_credentials_follow_the_same_rule(tenant, admin_agent):
    record = write(admin_agent, subject="user:9")
    deleter = make_agent(tenant, "read,delete", name="deleter")
    auditor = make_agent(tenant, "read,audit", name="auditor-bot")
    eraser = make_agent(tenant, "erase", name="eraser")
    body = {"subject": "user:9", "reason": "asked"}
    assert deleter.post("/api/v1/erasures", body).status_code == 403
    assert auditor.post("/api/v1/erasures", body).status_code == 403
    assert eraser.get("/api/v1/deletion-receipts").status_code == 403
    assert deleter.get("/api/v1/deletion-receipts").status_code == 403
    assert deleter.delete(f"{RECORDS}/{record['id']}").status_code == 200
    assert auditor.get("/api/v1/deletion-receipts").status_code == 200
    assert eraser.post("/api/v1/erasures", {"subject": "user:1", "reason": "r"}).status_code == 200
