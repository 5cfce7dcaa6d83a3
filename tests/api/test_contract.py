"""One input contract, applied alike on every operation: unknown members, strict types, one
text-limit policy, 413 for whatever is over its size, and strict query parameters.

Table-driven by endpoint family. A body or a query is validated before the operation looks
anything up, so the paths below name random ids: a refused request never reaches a 404.
"""

from __future__ import annotations

import json
import random
import uuid
from typing import Any
from urllib.parse import urlencode

import pytest
from django.utils import timezone

from apps.api.contract import TOO_LARGE, InputRejected, has_code, validate_input
from apps.core.problems import flatten_errors
from apps.records.serializers import RecordWriteInput
from apps.retrieval.serializers import SearchInput
from tests.conftest import make_agent
from tests.records.factories import body as record_body

from .support import assert_problem

pytestmark = pytest.mark.django_db

ALL_ACTIONS = "read,write,search,delete,review,state,erase,audit"
REASON_LIMIT = 2000
LONG_REASON = "r" * (REASON_LIMIT + 1)


@pytest.fixture
def every_action(tenant):
    return make_agent(tenant, ALL_ACTIONS, name="contract")


# Ids nobody has, the same in every process that collects this module (pytest-xdist's
# workers must collect the same test ids).
_IDS = random.Random("contract")


def _id() -> str:
    return str(uuid.UUID(int=_IDS.getrandbits(128), version=4))


def _send(agent: Any, method: str, path: str, payload: Any) -> Any:
    headers = {"Authorization": f"Bearer {agent.token}"}
    if method == "get":
        query = payload if isinstance(payload, str) else urlencode(payload or {}, doseq=True)
        return agent.client.get(f"{path}?{query}" if query else path, headers=headers)
    if method == "delete":
        query = payload if isinstance(payload, str) else urlencode(payload or {}, doseq=True)
        return agent.client.delete(f"{path}?{query}" if query else path, headers=headers)
    raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return agent.client.generic(
        method.upper(), path, data=raw, content_type="application/json", headers=headers
    )


def _search(**fields: Any) -> dict[str, Any]:
    return {"query": "carrier", **fields}


def _run(**fields: Any) -> dict[str, Any]:
    return {"task_id": "task-1", "owner": "service:checkout", **fields}


def _obligation(**fields: Any) -> dict[str, Any]:
    return {"task_id": "task-1", "kind": "charge", "key": "task-1:charge", **fields}


def _summary(**fields: Any) -> dict[str, Any]:
    return {"text": "a summary", "sources": [{"type": "record", "id": _id()}], "reason": "r"} | (
        fields
    )


# (case id, method, path, body or query, status, the field path that must be named)
Case = tuple[str, str, str, Any, int, str]

UNKNOWN_MEMBERS: list[Case] = [
    (
        "records-nested-source",
        "post",
        "/api/v1/records",
        record_body(source__url="x"),
        400,
        "source.url",
    ),
    ("search-scope", "post", "/api/v1/search", _search(scope={"domian": "x"}), 400, "scope.domian"),
    ("search-top", "post", "/api/v1/search", _search(topk=3), 400, "topk"),
    (
        "facts-check-item",
        "post",
        "/api/v1/facts/check",
        {"facts": [{"id": _id(), "versoin": 1}]},
        400,
        "facts[0].versoin",
    ),
    (
        "summaries-source",
        "post",
        "/api/v1/summaries",
        _summary(sources=[{"type": "record", "id": _id(), "why": "x"}]),
        400,
        "sources[0].why",
    ),
    (
        "erasure",
        "post",
        "/api/v1/erasures",
        {"subject": "user:1", "reason": "r", "dryrun": True},
        400,
        "dryrun",
    ),
    (
        "redact",
        "post",
        f"/api/v1/records/{_id()}/redact",
        {"fields": ["a"], "reason": "r", "mode": "x"},
        400,
        "mode",
    ),
    ("run-close", "post", f"/api/v1/runs/{_id()}/close", {"reason": "done"}, 400, "reason"),
    (
        "checkpoint",
        "post",
        f"/api/v1/runs/{_id()}/checkpoints",
        {"step": 1, "state": {}, "at": 1},
        400,
        "at",
    ),
]

COERCION: list[Case] = [
    # an integer where a string is expected
    ("runs-task-id-int", "post", "/api/v1/runs", _run(task_id=5), 400, "task_id"),
    ("runs-subject-int", "post", "/api/v1/runs", _run(subject=5), 400, "subject"),
    (
        "episode-role-int",
        "post",
        f"/api/v1/runs/{_id()}/episodes",
        {"role": 5, "content": "c"},
        400,
        "role",
    ),
    (
        "episode-content-int",
        "post",
        f"/api/v1/runs/{_id()}/episodes",
        {"role": "user", "content": 5},
        400,
        "content",
    ),
    ("obligation-kind-int", "post", "/api/v1/obligations", _obligation(kind=5), 400, "kind"),
    ("obligation-key-float", "post", "/api/v1/obligations", _obligation(key=1.5), 400, "key"),
    ("fail-reason-int", "post", f"/api/v1/obligations/{_id()}/fail", {"reason": 5}, 400, "reason"),
    (
        "cancel-reason-int",
        "post",
        f"/api/v1/obligations/{_id()}/cancel",
        {"reason": 5},
        400,
        "reason",
    ),
    (
        "promotion-reason-int",
        "post",
        f"/api/v1/records/{_id()}/promotion-requests",
        {"reason": 5},
        400,
        "reason",
    ),
    (
        "approve-reason-int",
        "post",
        f"/api/v1/promotion-requests/{_id()}/approve",
        {"reason": 5},
        400,
        "reason",
    ),
    (
        "reject-reason-int",
        "post",
        f"/api/v1/promotion-requests/{_id()}/reject",
        {"reason": 5},
        400,
        "reason",
    ),
    (
        "resolve-reason-int",
        "post",
        f"/api/v1/conflicts/{_id()}/resolve",
        {"resolution": "keep_current", "reason": 5},
        400,
        "reason",
    ),
    (
        "consent-reason-int",
        "post",
        "/api/v1/consents/consent:1/revoke",
        {"reason": 5},
        400,
        "reason",
    ),
    (
        "redact-reason-int",
        "post",
        f"/api/v1/records/{_id()}/redact",
        {"fields": ["a"], "reason": 5},
        400,
        "reason",
    ),
    (
        "erasure-subject-int",
        "post",
        "/api/v1/erasures",
        {"subject": 5, "reason": "r"},
        400,
        "subject",
    ),
    ("summary-text-int", "post", "/api/v1/summaries", _summary(text=5), 400, "text"),
    # a string where a number is expected
    (
        "checkpoint-step-string",
        "post",
        f"/api/v1/runs/{_id()}/checkpoints",
        {"step": "5", "state": {}},
        400,
        "step",
    ),
    (
        "facts-check-version-string",
        "post",
        "/api/v1/facts/check",
        {"facts": [{"id": _id(), "version": "1"}]},
        400,
        "facts[0].version",
    ),
    ("search-top-k-string", "post", "/api/v1/search", _search(top_k="5"), 400, "top_k"),
    (
        "search-min-similarity-string",
        "post",
        "/api/v1/search",
        _search(min_similarity="0.5"),
        400,
        "min_similarity",
    ),
    # a number where an id is expected
    (
        "facts-check-id-int",
        "post",
        "/api/v1/facts/check",
        {"facts": [{"id": 5}]},
        400,
        "facts[0].id",
    ),
    (
        "summary-source-id-int",
        "post",
        "/api/v1/summaries",
        _summary(sources=[{"type": "record", "id": 5}]),
        400,
        "sources[0].id",
    ),
    (
        "obligation-depends-on-int",
        "post",
        "/api/v1/obligations",
        _obligation(depends_on=[5]),
        400,
        "depends_on[0]",
    ),
    # booleans are JSON booleans
    (
        "erasure-dry-run-string",
        "post",
        "/api/v1/erasures",
        {"subject": "user:1", "reason": "r", "dry_run": "true"},
        400,
        "dry_run",
    ),
    (
        "erasure-dry-run-int",
        "post",
        "/api/v1/erasures",
        {"subject": "user:1", "reason": "r", "dry_run": 1},
        400,
        "dry_run",
    ),
    (
        "checkpoint-step-bool",
        "post",
        f"/api/v1/runs/{_id()}/checkpoints",
        {"step": True, "state": {}},
        400,
        "step",
    ),
    # enum values are strings
    (
        "resolve-resolution-int",
        "post",
        f"/api/v1/conflicts/{_id()}/resolve",
        {"resolution": 1, "reason": "r"},
        400,
        "resolution",
    ),
    (
        "search-purpose-list",
        "post",
        "/api/v1/search",
        _search(purpose=["decision"]),
        400,
        "purpose",
    ),
]

TEXT_LIMITS: list[Case] = [
    # The schema's maxLength counts the text as sent: surrounding whitespace that trimming
    # would drop still counts (schemathesis found a 201 for a task id over by its blank).
    (
        "obligation-task-id-over-by-its-blank",
        "post",
        "/api/v1/obligations",
        _obligation(task_id="\f" + "t" * 200),
        400,
        "task_id",
    ),
    (
        "record-key-over-by-its-blank",
        "post",
        "/api/v1/records",
        record_body(key="a" * 200 + " "),
        400,
        "key",
    ),
    (
        "promotion-reason",
        "post",
        f"/api/v1/records/{_id()}/promotion-requests",
        {"reason": LONG_REASON},
        400,
        "reason",
    ),
    (
        "resolve-reason",
        "post",
        f"/api/v1/conflicts/{_id()}/resolve",
        {"resolution": "keep_current", "reason": LONG_REASON},
        400,
        "reason",
    ),
    (
        "consent-reason",
        "post",
        "/api/v1/consents/consent:1/revoke",
        {"reason": LONG_REASON},
        400,
        "reason",
    ),
    (
        "redact-reason",
        "post",
        f"/api/v1/records/{_id()}/redact",
        {"fields": ["a"], "reason": LONG_REASON},
        400,
        "reason",
    ),
    (
        "erasure-reason",
        "post",
        "/api/v1/erasures",
        {"subject": "user:1", "reason": LONG_REASON},
        400,
        "reason",
    ),
    ("summary-reason", "post", "/api/v1/summaries", _summary(reason=LONG_REASON), 400, "reason"),
    ("delete-reason", "delete", f"/api/v1/records/{_id()}", {"reason": LONG_REASON}, 400, "reason"),
    (
        "erasure-subject",
        "post",
        "/api/v1/erasures",
        {"subject": "user:" + "1" * 300, "reason": "r"},
        400,
        "subject",
    ),
    (
        "erasure-consent-ref",
        "post",
        "/api/v1/erasures",
        {"consent_ref": "c" * 201, "reason": "r"},
        400,
        "consent_ref",
    ),
    (
        "redact-fields",
        "post",
        f"/api/v1/records/{_id()}/redact",
        {"fields": ["f"] * 101, "reason": "r"},
        400,
        "fields",
    ),
    # content over its size is a 413
    (
        "record-content",
        "post",
        "/api/v1/records",
        record_body(content="c" * (64 * 1024 + 1)),
        413,
        "content",
    ),
    ("summary-text", "post", "/api/v1/summaries", _summary(text="t" * 20_001), 413, "text"),
    (
        "episode-content",
        "post",
        f"/api/v1/runs/{_id()}/episodes",
        {"role": "user", "content": "c" * (256 * 1024 + 1)},
        413,
        "content",
    ),
    (
        "checkpoint-state",
        "post",
        f"/api/v1/runs/{_id()}/checkpoints",
        {"step": 1, "state": {"s": "x" * (256 * 1024)}},
        413,
        "state",
    ),
    (
        "obligation-payload",
        "post",
        "/api/v1/obligations",
        _obligation(payload={"p": "x" * (64 * 1024)}),
        413,
        "payload",
    ),
    (
        "commit-result",
        "post",
        f"/api/v1/obligations/{_id()}/commit",
        {"result": {"r": "x" * (64 * 1024)}},
        413,
        "result",
    ),
    (
        "promotion-evidence",
        "post",
        f"/api/v1/records/{_id()}/promotion-requests",
        {"reason": "r", "evidence": {"e": "x" * (64 * 1024)}},
        413,
        "evidence",
    ),
    (
        "resolve-value",
        "post",
        f"/api/v1/conflicts/{_id()}/resolve",
        {"resolution": "corrected", "reason": "r", "value": "x" * (64 * 1024)},
        413,
        "value",
    ),
]

QUERIES: list[Case] = [
    # JSON in a query string that no jsonb can hold (it was a 500): NaN, and NUL in a name
    (
        "facts-conditions-nan",
        "get",
        "/api/v1/facts",
        {"subject": "user:1", "conditions": '{"a": NaN}'},
        400,
        "conditions",
    ),
    (
        "facts-conditions-nul-name",
        "get",
        "/api/v1/facts",
        {"subject": "user:1", "conditions": '{"a\\u0000": 1}'},
        400,
        "conditions.a\x00",
    ),
    (
        "facts-conditions-too-long",
        "get",
        "/api/v1/facts",
        {"subject": "user:1", "conditions": json.dumps({"a": "x" * 4100})},
        400,
        "conditions",
    ),
    ("records-trust-bogus", "get", "/api/v1/records", {"trust": "bogus"}, 400, "trust"),
    ("records-status-bogus", "get", "/api/v1/records", {"status": "bogus"}, 400, "status"),
    (
        "records-sensitivity-bogus",
        "get",
        "/api/v1/records",
        {"sensitivity": "Secret"},
        400,
        "sensitivity",
    ),
    ("records-subject-empty", "get", "/api/v1/records", {"subject": ""}, 400, "subject"),
    (
        "records-subject-twice",
        "get",
        "/api/v1/records",
        "subject=user:1&subject=user:2",
        400,
        "subject",
    ),
    ("records-key-malformed", "get", "/api/v1/records", {"key": "Not A Key"}, 400, "key"),
    ("records-page-size-word", "get", "/api/v1/records", {"page_size": "abc"}, 400, "page_size"),
    ("records-page-size-zero", "get", "/api/v1/records", {"page_size": "0"}, 400, "page_size"),
    ("records-page-size-over", "get", "/api/v1/records", {"page_size": "501"}, 400, "page_size"),
    (
        "facts-domain-malformed",
        "get",
        "/api/v1/facts",
        {"subject": "user:1", "domain": "Bad Domain"},
        400,
        "domain",
    ),
    ("facts-subject-empty", "get", "/api/v1/facts", {"subject": ""}, 400, "subject"),
    ("runs-task-id-empty", "get", "/api/v1/runs", {"task_id": ""}, 400, "task_id"),
    ("runs-page-size-negative", "get", "/api/v1/runs", {"page_size": "-1"}, 400, "page_size"),
    (
        "episodes-page-size",
        "get",
        f"/api/v1/runs/{_id()}/episodes",
        {"page_size": "x"},
        400,
        "page_size",
    ),
    ("obligations-overdue-one", "get", "/api/v1/obligations", {"overdue": "1"}, 400, "overdue"),
    ("obligations-overdue-yes", "get", "/api/v1/obligations", {"overdue": "yes"}, 400, "overdue"),
    ("obligations-state-empty", "get", "/api/v1/obligations", {"state": ""}, 400, "state"),
    (
        "receipts-parent-malformed",
        "get",
        "/api/v1/deletion-receipts",
        {"parent": "nope"},
        400,
        "parent",
    ),
    ("receipts-kind-bogus", "get", "/api/v1/deletion-receipts", {"kind": "bogus"}, 400, "kind"),
    ("audit-page-size-word", "get", "/api/v1/audit-events", {"page_size": "abc"}, 400, "page_size"),
    ("audit-record-empty", "get", "/api/v1/audit-events", {"record": ""}, 400, "record"),
    ("promotions-state-empty", "get", "/api/v1/promotion-requests", {"state": ""}, 400, "state"),
    (
        "conflicts-state-twice",
        "get",
        "/api/v1/conflicts",
        "state=open&state=resolved",
        400,
        "state",
    ),
    (
        "delete-dry-run-upper",
        "delete",
        f"/api/v1/records/{_id()}",
        {"dry_run": "TRUE"},
        400,
        "dry_run",
    ),
]


def _cases(*tables: list[Case]) -> Any:
    rows = [case for table in tables for case in table]
    return pytest.mark.parametrize(
        ("method", "path", "payload", "status", "field"),
        [row[1:] for row in rows],
        ids=[row[0] for row in rows],
    )


@_cases(UNKNOWN_MEMBERS, COERCION, TEXT_LIMITS, QUERIES)
def test_it_refuses_naming_the_field(every_action, method, path, payload, status, field):
    body = assert_problem(_send(every_action, method, path, payload), status)
    assert field in body["errors"], body["errors"]


BODY_OPERATIONS = [
    "/api/v1/records",
    "/api/v1/search",
    "/api/v1/facts/check",
    "/api/v1/summaries",
    "/api/v1/erasures",
    "/api/v1/runs",
    "/api/v1/obligations",
    f"/api/v1/records/{_id()}/redact",
    f"/api/v1/records/{_id()}/promotion-requests",
    f"/api/v1/promotion-requests/{_id()}/approve",
    f"/api/v1/conflicts/{_id()}/resolve",
    "/api/v1/consents/consent:1/revoke",
    f"/api/v1/runs/{_id()}/episodes",
    f"/api/v1/runs/{_id()}/checkpoints",
    f"/api/v1/obligations/{_id()}/commit",
]


@pytest.mark.parametrize("path", BODY_OPERATIONS)
def test_it_answers_413_for_a_body_over_the_request_limit(every_action, settings, path):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    body = assert_problem(_send(every_action, "post", path, {"reason": "x" * 2000}), 413)
    assert "1000 bytes" in body["detail"]


def test_it_still_accepts_what_the_contract_allows(every_action):
    """The strict fields take what they document: a float with no fraction is an integer, a
    reason of exactly the limit is accepted, ``false`` is a boolean."""
    run = _send(every_action, "post", "/api/v1/runs", _run(subject="user:1"))
    assert run.status_code == 201, run.content
    run_id = run.json()["id"]
    checkpoint = _send(
        every_action, "post", f"/api/v1/runs/{run_id}/checkpoints", {"step": 2.0, "state": {}}
    )
    assert checkpoint.status_code == 201, checkpoint.content
    assert checkpoint.json()["step"] == 2
    erasure = _send(
        every_action,
        "post",
        "/api/v1/erasures",
        {"subject": "user:1", "reason": "r" * REASON_LIMIT, "dry_run": False},
    )
    assert erasure.status_code == 200, erasure.content
    listing = _send(every_action, "get", "/api/v1/obligations", {"overdue": "false"})
    assert listing.status_code == 200, listing.content


def _plain(serializer_class: Any, data: Any, context: dict[str, Any]) -> tuple[Any, Any]:
    serializer = serializer_class(data=data, context=context)
    if serializer.is_valid():
        return serializer.validated_data, None
    detail = serializer.errors
    return None, (flatten_errors(detail), has_code(detail, TOO_LARGE))


def _built_once(serializer_class: Any, data: Any, context: dict[str, Any]) -> tuple[Any, Any]:
    try:
        return validate_input(serializer_class, data, where="body", context=context), None
    except InputRejected as refused:
        return None, (refused.errors, refused.too_large)


def test_a_serializer_built_once_validates_as_one_built_for_the_call(tenant):
    """Every body validates with a serializer built once per thread: each outcome (validated
    data, errors by path, too large) is the one a serializer built for the call gives, in
    any order, the context of each call its own."""
    context = {"now": timezone.now(), "tenant": tenant, "dimension": 384}
    cases = [
        (RecordWriteInput, record_body()),
        (RecordWriteInput, record_body(scope={"domian": "commerce"}, extra=1)),
        (RecordWriteInput, record_body(value="v" * (70 * 1024), owner=5)),
        (RecordWriteInput, record_body(vector=[0.1] * 384)),
        (RecordWriteInput, record_body()),
        (SearchInput, _search(top_k=10, scope={"domain": "commerce"})),
        (SearchInput, _search(top_k="10", sensitivity=["secret"], purpose="decision")),
        (SearchInput, _search(vector=[0.5] * 384)),
        (SearchInput, _search(top_k=10)),
    ]
    for serializer_class, data in [*cases, *reversed(cases)]:
        plain = _plain(serializer_class, data, dict(context))
        assert _built_once(serializer_class, data, dict(context)) == plain, data
    # The context is the call's: without a tenant, a vector is refused.
    without = {"now": context["now"]}
    data = record_body(vector=[0.1] * 384)
    assert _built_once(RecordWriteInput, data, without) == _plain(RecordWriteInput, data, without)
