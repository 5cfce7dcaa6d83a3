"""The set-based deletion statement shared by record deletion, expiry and erasure."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.audit.models import AuditEvent, DeletionReceipt
from apps.core.actors import Actor
from apps.derivations.models import Embedding, Summary, SummarySource
from apps.governance import erasure
from apps.governance.services import legal_hold_place
from apps.records.models import Conflict, Fact, MemoryRecord, PromotionEvent
from apps.records.purge import Held, record_delete, records_compact_expired
from apps.tenancy.context import tenant_scope
from tests.conftest import make_agent
from tests.records.support import expire

from .support import drain, summarise, write

pytestmark = pytest.mark.django_db


def check_foreign_keys() -> None:
    """Run the deferred foreign-key checks now: a test's transaction never commits."""
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")


def test_a_partial_expiry_unlinks_the_versions_that_stay(admin_agent, tenant):
    """v1 superseded by v2 (accepted), v3 contends with v2; v2 expires: only v2 goes."""
    v1 = write(admin_agent, value="v1")
    v2 = write(admin_agent, value="v2", source__ref="interaction:2")
    # An independent reviewer: a credential cannot resolve a conflict it wrote in.
    reviewer = make_agent(tenant, "read,review", name="reviewer-bot")
    resolved = reviewer.post(
        f"/api/v1/conflicts/{v2['conflict']}/resolve",
        {"resolution": "accept_new", "reason": "the customer said so"},
    )
    assert resolved.status_code == 200, resolved.content
    v3 = write(admin_agent, value="v3", source__ref="interaction:3")
    summary = summarise(admin_agent, [v2["id"]]).json()
    other = summarise(admin_agent, [v1["id"]]).json()
    drain()
    expire(tenant, v2["id"])
    with tenant_scope(tenant.pk):
        assert records_compact_expired() == 1
        check_foreign_keys()
        kept = {r.pk: r for r in MemoryRecord.objects.all()}
        assert {str(pk) for pk in kept} == {v1["id"], v3["id"]}
        assert all(r.supersedes_id is None and r.superseded_by_id is None for r in kept.values())
        fact = Fact.objects.get()
        assert fact.current_id is None  # until the next write
        assert not Conflict.objects.exists()  # both conflicts took part with v2
        assert not Summary.objects.get(pk=summary["id"]).valid
        assert Summary.objects.get(pk=other["id"]).valid  # cites a version that stays
        # The fact stays, so pointers to it stay too.
        assert SummarySource.objects.get(summary_id=other["id"]).fact_id == fact.pk
        assert Embedding.objects.filter(record_id=v1["id"]).exists()
        assert not Embedding.objects.filter(record_id=v2["id"]).exists()
        receipt = DeletionReceipt.objects.get(kind="expiry")
        assert receipt.record_ids == [v2["id"]]
        assert receipt.counts["versions"] == 1
        assert receipt.counts["conflicts"] == 2


def test_a_refused_deletion_leaves_the_callers_transaction_usable(admin_agent, tenant):
    record = write(admin_agent)
    with tenant_scope(tenant.pk):
        stored = MemoryRecord.objects.get(pk=record["id"])
        legal_hold_place(
            tenant=tenant,
            actor=Actor.system("legal"),
            reason="case",
            fact=None,
            subject=stored.subject,
        )
        with pytest.raises(Held):
            record_delete(record=stored, actor=Actor.system("t"), reason="try")
        assert MemoryRecord.objects.filter(pk=record["id"]).exists()  # still usable


def test_a_deletion_takes_a_handful_of_statements_whatever_it_reaches(admin_agent, tenant):
    first = write(admin_agent, value="v1")
    versions = [first["id"]] + [
        write(admin_agent, value=f"v{n}", source__ref=f"interaction:{n}")["id"] for n in (2, 3)
    ]
    for n in range(10):
        assert summarise(admin_agent, [versions[n % 3]], text=f"s{n}").status_code == 201
    drain()
    with tenant_scope(tenant.pk):
        stored = MemoryRecord.objects.get(pk=first["id"])
        with CaptureQueriesContext(connection) as queries:
            result = record_delete(record=stored, actor=Actor.system("t"), reason="bench")
        assert result.receipt.counts["summaries_invalidated"] == 10
        assert result.receipt.counts["embeddings"] == 13
        assert not MemoryRecord.objects.exists()
        check_foreign_keys()
        event = AuditEvent.objects.get(action="record.delete")
        assert set(Summary.objects.values_list("invalidated_by", flat=True)) == {event.pk}
    # lock, hold check, versions, the deletion, receipt, audit, stamp (a delete used to take
    # some forty); a regression to per-row work would multiply this.
    assert len(queries) <= 10, [q["sql"][:80] for q in queries]


def test_an_erasure_reports_progress_after_each_batch(admin_agent, tenant, monkeypatch):
    for n in range(5):
        write(admin_agent, subject="user:gone", key=f"k{n}", value=n)
    write(admin_agent, subject="user:gone", key="k0", value="v2", source__ref="interaction:2")
    monkeypatch.setattr(erasure, "BATCH_FACTS", 2)
    seen: list[tuple[int, int]] = []
    with tenant_scope(tenant.pk):
        result = erasure.erasure_run(
            tenant=tenant,
            actor=Actor.system("t"),
            selector="subject",
            value="user:gone",
            reason="asked",
            progress=lambda done, total: seen.append((done, total)),
        )
        assert not PromotionEvent.objects.exists()
        check_foreign_keys()
    assert result.totals["records"] == 6
    assert result.totals["facts"] == 5
    assert [total for _, total in seen] == [6, 6, 6]
    assert [done for done, _ in seen][-1] == 6
    assert len({done for done, _ in seen}) == 3  # it advanced with every batch


def test_the_deletion_statement_is_planned_once_per_connection(admin_agent, tenant):
    """Each deletion reuses the connection's one plan of the statement: planned afresh, it
    cost more than it ran (PostgreSQL's default re-planned it for every fact)."""
    ids = [write(admin_agent, key=f"k{n}", value=n)["id"] for n in range(7)]
    with tenant_scope(tenant.pk):
        for pk in ids:
            record_delete(
                record=MemoryRecord.objects.get(pk=pk), actor=Actor.system("t"), reason="r"
            )
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
                " WHERE statement LIKE '%%DELETE FROM \"records_memoryrecord\"%%'"
            )
            assert cursor.fetchall() == [(7, 0)]
