"""``POST /api/v1/records/batch``: up to 500 memory writes in one request, answered per item.

Each item is a ``POST /records`` body, validated by the same contract and stored by the same
service, in a savepoint of its own: a refused item (``400``, ``413``, ``422``, audited as
``record.write_rejected`` like a refused single write, with its ``index``) stores nothing, and
the other items are written. The request answers ``200`` with every item's status, the one
``POST /records`` would have given it. Items are written in order, each seeing the ones before
it: an item repeating an earlier one is that write again (``unchanged``, or an observation).

What one batch shares, and 500 single writes each pay for: the HTTP exchange, authentication
and the tenant context, the idempotency key's lock and lookup, and one commit (a WAL flush)
for them all (``benchmarks/records_batch.py``). What it does not do inside the request is the
embedding: where the tenant's model embeds at write (``e5-small``), 500 embeddings would take
the request past its time limit on a busy machine, so a batch's versions are embedded by the
worker after commit, as every other model's are (found by their words at once, by meaning
seconds later).

One ``Idempotency-Key`` covers the batch, with the single write's rules (the same key with
another body is a ``422``, one still running a ``409``). The key keeps no records: an answer
holding 500 memories would keep their content past a deletion. It keeps each item's status,
record id, outcome, promotion request and notices (a refused item's problem), and a retry
answers from that, with each record as it is stored now; one deleted or expired since is a
``410`` item, the ``IdempotencyTombstone`` problem. Nothing is written again.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db import transaction
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from apps.api.contract import TOO_LARGE, ContractView, has_code
from apps.api.idempotency import EXPIRED_DETAIL, idempotent, tombstone_problem
from apps.api.models import TOMBSTONE_DETAIL
from apps.core.actors import Actor
from apps.core.errors import DomainError
from apps.core.problems import flatten_errors, problem_body
from apps.tenancy.models import AgentCredential
from apps.work.queued import work_all_queued

from .api import (
    record_write_answer,
    record_write_refusal,
    request_actor,
    with_open_conflict,
)
from .models import MemoryRecord
from .responses import RecordBatchResponse
from .selectors import records_live
from .serializers import RecordBatchInput, RecordSerializer, RecordWriteInput
from .validation import WriteRejected

# What a replay shows of an item besides its record, as the first answer gave it.
WRITE_MEMBERS = ("outcome", "promotion_request", "notices")


def batch_item(
    index: int,
    item: Any,
    *,
    credential: AgentCredential,
    actor: Actor,
    context: dict[str, Any],
) -> dict[str, Any]:
    """Item ``index`` validated, written in a savepoint and answered as ``POST /records``
    would have answered it."""
    serializer = RecordWriteInput(data=item, context=context)
    if not serializer.is_valid():
        detail = serializer.errors
        status = 413 if has_code(detail, TOO_LARGE) else 400
        return _refused(index, flatten_errors(detail), status, credential=credential, actor=actor)
    valid = serializer.validated_data
    try:
        # A refusal found inside (a revoked consent, no open run) rolls back this item only.
        with transaction.atomic():
            status, body = record_write_answer(
                credential=credential, actor=actor, data=valid["record"], vector=valid["vector"]
            )
    except WriteRejected as rejected:
        errors = rejected.errors or {}
        return _refused(index, errors, rejected.status, credential=credential, actor=actor)
    except DomainError as refused:
        problem = problem_body(
            refused.status,
            refused.detail,
            slug=refused.slug,
            errors=refused.errors,
            extra=refused.extra,
        )
        return {"index": index, "status": refused.status, "error": problem}
    return {"index": index, "status": status, "record": body}


def _refused(
    index: int,
    errors: dict[str, list[str]],
    status: int,
    *,
    credential: AgentCredential,
    actor: Actor,
) -> dict[str, Any]:
    problem = record_write_refusal(
        credential=credential,
        actor=actor,
        errors=errors,
        status=status,
        audit_data={"batch_index": index},
    )
    return {"index": index, "status": status, "error": problem}


def batch_memo(response: Response) -> dict[str, Any]:
    """What the key keeps of a batch's answer: no memory content (module docstring)."""
    kept = []
    for item in response.data["items"]:
        record = item.get("record")
        if record is None:
            kept.append(item)
        else:
            members = {name: record[name] for name in WRITE_MEMBERS}
            kept.append(
                {
                    "index": item["index"],
                    "status": item["status"],
                    "id": str(record["id"]),
                    **members,
                }
            )
    return {"items": kept}


OUTCOMES = frozenset({"created", "conflict", "observed", "unchanged"})


def batch_memo_content_free(body: Any) -> bool:
    """Whether a stored response is a batch's memo (:func:`batch_memo`) as it writes them:
    ids, statuses, outcomes and the server's notices, and the problems of refused items (which
    stored nothing). What erasure verification accepts beside a deleted id, as it accepts a
    search's memo of the ids it returned."""
    if not isinstance(body, dict) or set(body) != {"items"} or not isinstance(body["items"], list):
        return False
    for item in body["items"]:
        if not isinstance(item, dict) or not isinstance(item.get("status"), int):
            return False
        if "error" in item:
            if set(item) != {"index", "status", "error"}:
                return False
            continue
        if set(item) != {"index", "status", "id", *WRITE_MEMBERS}:
            return False
        notices = item["notices"]
        if item["outcome"] not in OUTCOMES or not (
            isinstance(notices, list) and all(isinstance(n, str) for n in notices)
        ):
            return False
        if not all(_is_id(item[name]) for name in ("id", "promotion_request") if item[name]):
            return False
    return True


def _is_id(value: Any) -> bool:
    try:
        uuid.UUID(str(value))
    except ValueError:
        return False
    return True


def batch_replayed(memo: dict[str, Any]) -> list[dict[str, Any]]:
    """A retry's answer, from the key's memo: each record as stored now, a ``410`` item for
    one deleted or expired since."""
    ids = [item["id"] for item in memo["items"] if "id" in item]
    live = {str(r.pk): r for r in with_open_conflict(records_live().filter(pk__in=ids))}
    # Expired versions stay stored until compaction; deleted ones are gone.
    expired = {
        str(pk)
        for pk in MemoryRecord.objects.filter(pk__in=set(ids) - set(live)).values_list(
            "pk", flat=True
        )
    }
    answers = []
    for item in memo["items"]:
        record_id = item.get("id")
        if record_id is None:
            answers.append(item)
        elif record_id in live:
            body = dict(RecordSerializer(live[record_id]).data)
            body.update({name: item[name] for name in WRITE_MEMBERS})
            answers.append({"index": item["index"], "status": item["status"], "record": body})
        else:
            gone = {
                "id": record_id,
                "status": "expired" if record_id in expired else "deleted",
                "detail": EXPIRED_DETAIL if record_id in expired else TOMBSTONE_DETAIL,
            }
            problem = tombstone_problem(gone, first_status=item["status"])
            answers.append({"index": item["index"], "status": problem["status"], "error": problem})
    return answers


class RecordBatchView(ContractView):
    """Up to 500 memory writes, each answered on its own (module docstring)."""

    required_actions = {"POST": "write"}
    body_input = {"POST": RecordBatchInput}

    @extend_schema(responses={200: RecordBatchResponse})
    @idempotent(replay="rerun", memo=batch_memo)
    def post(self, request: Request) -> Response:
        credential = request.auth
        assert isinstance(credential, AgentCredential)
        memo = getattr(self, "idempotent_replay", None)
        if memo is not None:
            items = batch_replayed(memo)
        else:
            actor = request_actor(request)
            # One context for every item: the tenant (for vectors) and the request's clock.
            context = self.input_context(request)
            # Embeddings go to the worker (module docstring).
            with work_all_queued():
                items = [
                    batch_item(index, item, credential=credential, actor=actor, context=context)
                    for index, item in enumerate(self.body["items"])
                ]
        succeeded = sum(1 for item in items if 200 <= item["status"] < 300)
        return Response({"items": items, "succeeded": succeeded, "failed": len(items) - succeeded})
