"""The console shows internal names by their labels: no ``held_facts``, ``stored_responses``,
``selector``, ``tool_call`` or ``promotion.approve`` where a person reads the page (the raw
name may stay in a tooltip, in code or in the JSON the API returns).

Every page of a tenant with some of everything (requests, conflicts, a deletion, an erasure
job, runs and obligations, audit events, canned reasons, claims) is read as its admin; the
visible text, outside ``code``, ``pre``, ``kbd``, monospaced data and attributes, must hold
no snake_case name and no dotted audit action.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from django.test import override_settings
from django.urls import reverse

from apps.audit.models import DeletionReceipt
from apps.core.actors import Actor
from apps.governance.models import ErasureJob
from apps.records.models import Conflict, PromotionRequest
from apps.review.claims import claims_take
from apps.review.reasons import review_reason_add
from apps.tenancy.context import tenant_scope
from apps.tenancy.templatetags.console_format import action_label, human_label
from tests.conftest import make_agent
from tests.derivations.support import drain, write

pytestmark = pytest.mark.django_db

SNAKE = re.compile(r"\b[a-z]+(?:_[a-z]+)+\b")
ACTION = re.compile(
    r"\b(?:record|promotion|conflict|erasure|review|credential|membership|legal_hold|"
    r"obligation|run|episode|checkpoint|tenant|platform|consent|retention|fact|summary|"
    r"search|state)\.[a-z_]+\b"
)
# Elements whose text is data or code, shown as it is stored.
RAW = {"code", "pre", "kbd", "script", "style", "datalist", "textarea", "template"}
RAW_CLASSES = {"mono", "digest"}


class VisibleText(HTMLParser):
    """The text a reader sees, outside raw elements."""

    VOID = {"br", "img", "input", "meta", "link", "hr", "source", "wbr", "col", "area", "base"}

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[bool] = []
        self.chunks: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag in self.VOID:
            return
        classes = set((dict(attrs).get("class") or "").split())
        raw = tag in RAW or bool(classes & RAW_CLASSES) or (self.stack and self.stack[-1])
        self.stack.append(bool(raw))

    def handle_endtag(self, tag):
        if tag in self.VOID:
            return
        if self.stack:
            self.stack.pop()

    def handle_data(self, data):
        if not (self.stack and self.stack[-1]):
            self.chunks.append(data)


def internal_names(html: str) -> list[str]:
    parser = VisibleText()
    parser.feed(html)
    text = " ".join(parser.chunks)
    return sorted(set(SNAKE.findall(text)) | set(ACTION.findall(text)))


@pytest.fixture
def busy_tenant(tenant, owner):
    """A tenant with some of everything a page can show."""
    admin = make_agent(tenant, "read,write,search,delete,review,state,erase,audit", "admin-bot")
    witness = make_agent(tenant, "read,write", "crm-sync")
    first = write(admin, subject="user:1", key="shipping.preference", value="a")
    write(
        witness,
        subject="user:1",
        key="shipping.preference",
        value="a",
        source={"kind": "tool_call", "ref": "crm:1"},
    )
    write(admin, subject="user:2", key="shipping.preference", value="a")
    write(
        admin,
        subject="user:2",
        key="shipping.preference",
        value="b",
        source={"kind": "document", "ref": "doc:2"},
    )
    doomed = write(admin, subject="user:3", key="contact.email", value="x@example.com")
    assert admin.delete(f"/api/v1/records/{doomed['id']}").status_code == 200
    for key in ("a", "b", "c"):
        write(admin, subject="user:4", key=f"note.{key}")
    with override_settings(ERASURE_JOB_THRESHOLD_RECORDS=2):
        job = admin.post("/api/v1/erasures", {"subject": "user:4", "reason": "asked"})
    assert job.status_code == 202
    drain()
    run = admin.post("/api/v1/runs", {"task_id": "t-1", "owner": "service:checkout"}).json()
    admin.post(
        "/api/v1/obligations",
        {"task_id": "t-1", "kind": "email", "key": "send-1", "payload": {"to": "a"}},
    )
    admin.post(f"/api/v1/runs/{run['id']}/close", {})
    actor = Actor.for_user(owner)
    with tenant_scope(tenant.pk):
        review_reason_add(tenant=tenant, decision="reject", text="Test data", actor=actor)
        requests = list(PromotionRequest.objects.all())
        claims_take(tenant=tenant, request_ids=[r.pk for r in requests], actor=actor)
    return {"record": first["id"]}


def _pages(tenant, ids) -> list[str]:
    with tenant_scope(tenant.pk):
        receipt = DeletionReceipt.objects.filter(parent__isnull=True, kind="record").first()
        erasure = DeletionReceipt.objects.filter(kind="erasure").first()
        job = ErasureJob.objects.first()
        request = PromotionRequest.objects.first()
        conflict = Conflict.objects.first()
    assert receipt is not None
    assert erasure is not None
    assert job is not None
    assert request is not None
    assert conflict is not None

    def page(name: str, **kwargs) -> str:
        return reverse(f"console:{name}", kwargs={"tenant_slug": tenant.slug, **kwargs})

    return [
        page("dashboard"),
        page("memories"),
        page("memory", record_id=ids["record"]),
        page("memory-subject", subject="user:1"),
        page("memory-scopes"),
        page("receipt", receipt_id=receipt.pk),
        page("review"),
        page("review") + "?group=source",
        page("review-request", request_id=request.pk),
        page("review-bulk-approve"),
        page("review-settings"),
        page("review-throughput"),
        page("conflicts"),
        page("conflict", conflict_id=conflict.pk),
        page("runs"),
        page("deletions"),
        page("deletion", receipt_id=receipt.pk),
        page("deletion", receipt_id=erasure.pk),
        page("erasures"),
        page("erasure-job", job_id=job.pk),
        page("retention"),
        page("holds"),
        page("audit"),
        page("credentials"),
        page("members"),
    ]


def test_no_page_shows_an_internal_name_where_a_label_belongs(client, tenant, owner, busy_tenant):
    client.force_login(owner)
    found = {}
    for path in _pages(tenant, busy_tenant):
        response = client.get(path)
        assert response.status_code == 200, path
        names = internal_names(response.content.decode())
        if names:
            found[path] = names
    assert found == {}, "\n".join(f"{path}: {names}" for path, names in found.items())


def test_the_labels_keep_the_raw_name_in_a_tooltip(client, tenant, owner, busy_tenant):
    client.force_login(owner)
    with tenant_scope(tenant.pk):
        erasure = DeletionReceipt.objects.filter(kind="erasure").first()
    assert erasure is not None
    html = client.get(
        reverse("console:deletion", kwargs={"tenant_slug": tenant.slug, "receipt_id": erasure.pk})
    ).content.decode()
    assert 'title="held_facts"' in html
    assert "Facts kept under a legal hold" in html
    audit = client.get(reverse("console:audit", kwargs={"tenant_slug": tenant.slug})).content
    assert 'title="record.write"' in audit.decode()
    assert "Record written" in audit.decode()


@pytest.mark.parametrize(
    ("name", "label"),
    [
        ("held_facts", "Facts kept under a legal hold"),
        ("stored_responses", "Stored API responses (left as tombstones)"),
        ("outbox", "Queued background work"),
        ("selector", "Erased by"),
        ("tool_call", "Tool call"),
        ("something_new", "Something new"),
        ("erasure.batch", "Erasure batch"),
    ],
)
def test_an_internal_name_has_a_label(name, label):
    assert human_label(name) == label


def test_every_audit_action_the_code_writes_has_a_label():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "apps"
    actions = set()
    for path in root.rglob("*.py"):
        actions |= set(re.findall(r'action="([a-z_]+\.[a-z_]+)"', path.read_text()))
    assert actions
    unlabelled = {a for a in actions if action_label(a) == human_label(a.replace(".", " "))}
    from apps.tenancy.templatetags.console_format import ACTION_LABELS

    assert unlabelled - set(ACTION_LABELS) == set()
