"""The schema refuses exactly what the server refuses, at the edges a client (or schemathesis)
finds first: blanks and whitespace, NUL, null, empty lists, rules between members, the ends of
the calendar. Each case is checked both ways: against the request body the schema declares,
and by sending it; a body the schema admits is never a 400, one it refuses always is."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.records.factories import body as record_body

from .contract import admits, openapi

RUN = "/api/v1/runs/{run_id}"
CONFLICT = "/api/v1/conflicts/{conflict_id}/resolve"
ACCEPTED = {200, 201, 202, 404, 409, 422}

CASES: list[tuple[str, str, dict[str, Any], bool]] = [
    # Text that refuses a blank refuses whitespace as str.strip() counts it, not as \s does.
    ("write", "/api/v1/records", record_body(reason="   "), False),
    ("write", "/api/v1/records", record_body(reason="\x1c"), False),
    ("write", "/api/v1/records", record_body(reason="\ufeff why"), True),
    ("write", "/api/v1/records", record_body(source={"kind": "document", "ref": ""}), False),
    ("write", "/api/v1/records", record_body(content="  "), False),
    ("write", "/api/v1/records", record_body(reason="no\x00nul"), False),
    ("write", "/api/v1/records", record_body(value=None) | {"value": None}, False),
    ("write", "/api/v1/records", record_body(value=0), True),
    # retention consent needs a consent_ref; session needs a run id
    ("write", "/api/v1/records", record_body(retention={"basis": "consent"}), False),
    (
        "write",
        "/api/v1/records",
        record_body(retention={"basis": "consent", "consent_ref": " "}),
        False,
    ),
    ("write", "/api/v1/records", record_body(retention={"basis": "session"}), False),
    (
        "write",
        "/api/v1/records",
        record_body(retention={"basis": "session"}, source__run_id="run-7"),
        False,
    ),
    # a ttl longer than zero; no years
    (
        "write",
        "/api/v1/records",
        record_body(retention={"basis": "contract", "ttl": "PT0S"}),
        False,
    ),
    (
        "write",
        "/api/v1/records",
        record_body(retention={"basis": "contract", "ttl": "P1Y"}),
        False,
    ),
    (
        "write",
        "/api/v1/records",
        record_body(retention={"basis": "contract", "ttl": "PT0.5S"}),
        True,
    ),
    # a redaction names fields exactly when its state applies them
    (
        "write",
        "/api/v1/records",
        record_body(redaction={"state": "none", "fields": ["a"]}),
        False,
    ),
    ("write", "/api/v1/records", record_body(redaction={"state": "required"}), False),
    ("write", "/api/v1/records", record_body(redaction={"state": "none", "fields": []}), True),
    # timestamps: any RFC 3339 zone; not a moment outside years 1 to 9999 in UTC
    ("write", "/api/v1/records", record_body(observed_at="2020-01-01T00:00:00+16:44"), True),
    ("write", "/api/v1/records", record_body(observed_at="0001-01-01T23:00:00+01:00"), False),
    ("write", "/api/v1/records", record_body(observed_at="0001-01-01T00:00:00-01:00"), True),
    ("write", "/api/v1/records", record_body(observed_at="2020-01-01T00:00:00Z\n"), False),
    ("write", "/api/v1/records", record_body(observed_at="2020-01-01T24:00:00Z"), False),
    # search: a query or a vector; a decision names its domain
    ("search", "/api/v1/search", {}, False),
    ("search", "/api/v1/search", {"query": " "}, False),
    ("search", "/api/v1/search", {"query": "x", "purpose": None}, True),
    ("search", "/api/v1/search", {"query": "x", "purpose": "decision"}, False),
    ("search", "/api/v1/search", {"query": "x", "purpose": "decision", "scope": None}, False),
    (
        "search",
        "/api/v1/search",
        {"query": "x", "purpose": "decision", "scope": {"domain": "commerce"}},
        True,
    ),
    # lists with a lower bound
    ("read", "/api/v1/facts/check", {"facts": []}, False),
    ("read", "/api/v1/facts/check", {"facts": [{"id": str(uuid.uuid4())}]}, True),
    ("write", "/api/v1/summaries", {"text": "t", "reason": "r", "sources": []}, False),
    # erasure: exactly one selector
    ("erase", "/api/v1/erasures", {"reason": "r", "dry_run": True}, False),
    ("erase", "/api/v1/erasures", {"subject": "a:1", "owner": "user:1", "reason": "r"}, False),
    (
        "erase",
        "/api/v1/erasures",
        {"subject": None, "owner": "user:1", "reason": "r", "dry_run": True},
        True,
    ),
    ("erase", "/api/v1/erasures", {"subject": "a:1", "reason": "  ", "dry_run": True}, False),
    # a corrected resolution carries a value
    ("review", CONFLICT, {"resolution": "corrected", "reason": "r"}, False),
    ("review", CONFLICT, {"resolution": "corrected", "value": None, "reason": "r"}, False),
    ("review", CONFLICT, {"resolution": "corrected", "value": False, "reason": "r"}, True),
    ("review", CONFLICT, {"resolution": "keep_current", "reason": "r"}, True),
    # ... and only a corrected one: the others keep a value already written
    ("review", CONFLICT, {"resolution": "keep_current", "value": "x", "reason": "r"}, False),
    ("review", CONFLICT, {"resolution": "accept_new", "value": False, "reason": "r"}, False),
    ("review", CONFLICT, {"resolution": "accept_new", "value": None, "reason": "r"}, True),
    # an episode: exactly one of content (as sent) and content_ref (trimmed)
    ("state", RUN + "/episodes", {"role": "user", "content_ref": "   "}, False),
    ("state", RUN + "/episodes", {"role": "user", "content": "   "}, True),
    ("state", RUN + "/episodes", {"role": "user", "content": "a", "content_ref": "b"}, False),
    ("state", RUN + "/episodes", {"role": "", "content": "a"}, False),
    # obligation keys are kept as sent, but one of only whitespace is no key
    ("state", "/api/v1/obligations", {"task_id": "t", "kind": "k", "key": " "}, False),
    ("state", "/api/v1/obligations", {"task_id": "t", "kind": "k", "key": " k "}, True),
    ("state", "/api/v1/obligations", {"task_id": "t", "kind": "k", "key": ""}, False),
    ("state", RUN + "/checkpoints", {"step": 0, "state": None}, False),
    ("state", RUN + "/checkpoints", {"step": 0, "state": []}, True),
]


@pytest.mark.parametrize(
    ("action", "path", "body", "valid"),
    CASES,
    ids=[f"{path.rsplit('/', 1)[-1]}-{i}" for i, (_, path, _, _) in enumerate(CASES)],
)
def test_the_schema_and_the_server_agree(tenant, action, path, body, valid):
    from tests.conftest import make_agent

    assert admits(path, "post", body) == valid, body
    agent = make_agent(tenant, action)
    target = path
    if "{run_id}" in path:
        run = make_agent(tenant, "state").post("/api/v1/runs", {"task_id": "t", "owner": "user:1"})
        target = path.replace("{run_id}", run.json()["id"])
    target = target.replace("{conflict_id}", str(uuid.uuid4()))
    response = agent.post(target, body)
    if valid:
        assert response.status_code in ACCEPTED, response.content[:400]
    else:
        assert response.status_code == 400, response.content[:400]


def test_a_search_without_a_body_is_refused_as_the_schema_says():
    assert openapi()["paths"]["/api/v1/search"]["post"]["requestBody"]["required"] is True
