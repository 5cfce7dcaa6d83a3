"""A deletion (one generated statement) changes what the plan read from the same definition
said it would: its counts are the preview's, the rows it withdraws the plan's, and no row is
left referring to what went (the plan's residues), on the prepared cursor and on Django's."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.apps import apps
from django.db import transaction
from django.utils import timezone

from apps.api.models import IdempotencyKey
from apps.core import deletion
from apps.derivations.models import Summary
from apps.records.models import (
    Fact,
    LegalHold,
    MemoryRecord,
    PromotionEvent,
    PromotionRequest,
)
from apps.review.models import ReviewClaim
from apps.state.models import Obligation, Run
from apps.tenancy.context import prepared_cursor, tenant_scope
from apps.work.models import OutboxMessage
from tests.conftest import make_agent

from .support import drain, summarise, write

pytestmark = pytest.mark.django_db

NOW = timezone.now()


class Rollback(Exception):
    pass


def snapshot() -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table the definition reaches (vectors and full text aside)."""
    rows = {}
    for model in deletion.definition().reached_from(deletion.definition().subject_models()):
        names = [
            f.attname for f in model._meta.concrete_fields if f.name not in {"vector", "search"}
        ]
        # Sorted by every column as text: the first (often the tenant) ties across rows.
        rows[model._meta.label] = sorted(
            model.objects.values_list(*names), key=lambda row: [str(value) for value in row]
        )
    return rows


def carried_out(prepared: bool, **roots: Any) -> tuple[deletion.Outcome, Any, list[Any]]:
    try:
        with transaction.atomic():
            if prepared:
                with prepared_cursor() as cursor:
                    outcome = deletion.run(**roots, now=NOW, reason="parity", cursor=cursor)
            else:
                outcome = deletion.run(**roots, now=NOW, reason="parity")
            after, residues = snapshot(), deletion.Plan(**roots).residues()
            raise Rollback
    except Rollback:
        pass
    return outcome, after, residues


def withdrawn_by(plan: deletion.Plan, outcome: deletion.Outcome) -> dict[str, list[str]]:
    return {
        label: sorted(map(str, plan.withdrawn(apps.get_model(label)).values_list("pk", flat=True)))
        for label in outcome.withdrawn
    }


def assert_same(**roots: Any) -> deletion.Outcome:
    before = snapshot()
    plan = deletion.Plan(**roots)
    preview = plan.counts()
    fast, fast_after, fast_residues = carried_out(True, **roots)
    plain, plain_after, plain_residues = carried_out(False, **roots)
    assert snapshot() == before  # each ran in a savepoint rolled back
    assert fast.counts() == plain.counts() == preview
    assert fast_residues == plain_residues == []
    assert fast.withdrawn.keys() == plain.withdrawn.keys()
    assert {k: sorted(map(str, v)) for k, v in fast.withdrawn.items()} == withdrawn_by(plan, fast)
    assert fast_after == plain_after
    assert fast_after != before
    return fast


def stored_response(tenant: Any, resource_id: Any, key: str) -> None:
    IdempotencyKey.objects.create(
        tenant=tenant,
        credential_id=tenant.pk,
        key=key,
        request_hash="h",
        status_code=201,
        response_body={"id": str(resource_id), "value": "secret"},
        resource_id=str(resource_id),
        created_at=NOW,
    )


def queued(tenant: Any, object_id: Any) -> None:
    OutboxMessage.objects.create(
        tenant=tenant, task_name="derivations.embed_record", object_id=object_id, created_at=NOW
    )


def test_deleting_a_fact_with_every_relation_populated(admin_agent, tenant):
    v1 = write(admin_agent, value="v1")
    v2 = write(admin_agent, value="v2", source__ref="interaction:2")  # conflicts with v1
    reviewer = make_agent(tenant, "read,review", name="reviewer-bot")
    resolved = reviewer.post(
        f"/api/v1/conflicts/{v2['conflict']}/resolve",
        {"resolution": "accept_new", "reason": "the customer said so"},
    )
    assert resolved.status_code == 200, resolved.content
    v3 = write(admin_agent, value="v3", source__ref="interaction:3")
    other = write(admin_agent, key="other.key", value="stays")
    cites_v1 = summarise(admin_agent, [v1["id"]]).json()
    cites_both = summarise(admin_agent, [v3["id"], other["id"]]).json()
    stays = summarise(admin_agent, [other["id"]]).json()
    drain()
    with tenant_scope(tenant.pk):
        fact = Fact.objects.get(pk=MemoryRecord.objects.get(pk=v1["id"]).fact_id)
        Summary.objects.filter(pk=cites_both["id"]).update(valid=False)  # already invalid
        request = PromotionRequest.objects.create(
            tenant=tenant, record_id=v3["id"], requested_by_type="system", requested_at=NOW
        )
        ReviewClaim.objects.create(
            tenant=tenant,
            request=request,
            holder_id="1",
            holder_label="r",
            claimed_at=NOW,
            expires_at=NOW + timedelta(minutes=5),
        )
        # An event of the record that stays, from the request that goes: unlinked.
        PromotionEvent.objects.create(
            tenant=tenant,
            record_id=other["id"],
            request=request,
            promoted_by_type="system",
            promoted_at=NOW,
        )
        LegalHold.objects.create(
            tenant=tenant,
            fact=fact,
            reason="closed case",
            placed_by_label="legal",
            placed_at=NOW,
            lifted_at=NOW,
        )
        for n, pk in enumerate([v1["id"], request.pk, v2["conflict"], cites_v1["id"], stays["id"]]):
            stored_response(tenant, pk, f"k{n}")
        for pk in (v2["id"], cites_v1["id"], stays["id"]):
            queued(tenant, pk)
        versions = list(MemoryRecord.objects.filter(fact=fact).values_list("pk", flat=True))
        outcome = assert_same(deleted={MemoryRecord: versions, Fact: [fact.pk]})
    counts = outcome.counts()
    assert counts["versions"] == 3
    assert counts["summaries_invalidated"] == 1  # the other citing one was invalid already
    assert counts["stored_responses"] >= 4
    assert counts["outbox"] >= 2  # and the finished work of the writes
    assert counts["promotion_requests"] == 1


def test_erasing_a_run_and_stripping_an_obligation(admin_agent, tenant):
    run = admin_agent.post("/api/v1/runs", {"task_id": "t", "owner": "service:x"}).json()
    episode = admin_agent.post(
        f"/api/v1/runs/{run['id']}/episodes", {"role": "tool", "content": "the courier said"}
    ).json()
    admin_agent.post(f"/api/v1/runs/{run['id']}/checkpoints", {"step": 0, "state": {"a": 1}})
    summary = admin_agent.post(
        "/api/v1/summaries",
        {
            "text": "from a run",
            "sources": [{"type": "episode", "id": episode["id"]}],
            "reason": "context",
        },
    ).json()
    obligation = admin_agent.post(
        "/api/v1/obligations",
        {"task_id": "t", "kind": "charge", "key": "t:1", "payload": {"amount": 4}},
    ).json()
    drain()
    with tenant_scope(tenant.pk):
        stored_response(tenant, episode["id"], "e")
        stored_response(tenant, obligation["id"], "o")
        outcome = assert_same(
            deleted={Run: [run["id"]]}, withdrawn={Obligation: [obligation["id"]]}
        )
    counts = outcome.counts()
    assert (counts["runs"], counts["episodes"], counts["checkpoints"]) == (1, 1, 1)
    assert counts["obligations_stripped"] == 1
    assert counts["summaries_invalidated"] == 1
    assert counts["stored_responses"] >= 2  # the API keyed its own responses too
    assert [str(pk) for pk in outcome.withdrawn_ids(Summary)] == [summary["id"]]
