"""Every kind of answer the API gives is the shape its OpenAPI schema declares.

Each test drives an operation into the answers it can give (a listing's page, a dry run and
the deletion, an erasure done at once and as a job, a record hit and a summary hit) and
validates the body against the schema's response for its path, method and status.
"""

from __future__ import annotations

import pytest

from tests.conftest import make_agent
from tests.derivations.support import drain, summarise
from tests.records.factories import body

from .contract import assert_conforms

pytestmark = pytest.mark.django_db

EVERY_ACTION = "read,write,search,delete,review,state,erase,audit"


@pytest.fixture
def agent(tenant):
    return make_agent(tenant, EVERY_ACTION, name="contract")


def write(agent, **overrides):
    response = agent.post("/api/v1/records", body(**overrides))
    assert response.status_code == 201, response.content[:500]
    return assert_conforms(response, "/api/v1/records", "POST")


def test_listings_answer_their_paginated_envelope(agent, tenant):
    first = write(agent, subject="user:1", value="carrier_a")
    write(agent, subject="user:1", value="carrier_b")  # a conflict
    agent.post(f"/api/v1/records/{first['id']}/promotion-requests", {"reason": "seen twice"})
    run = agent.post("/api/v1/runs", {"task_id": "t-1", "owner": "service:bot"}).json()
    agent.post(f"/api/v1/runs/{run['id']}/episodes", {"role": "user", "content": "hello"})
    agent.post("/api/v1/obligations", {"task_id": "t-1", "kind": "email", "key": "k-1"})
    doomed = write(agent, subject="user:9")
    agent.delete(f"/api/v1/records/{doomed['id']}")
    # Listings whose paginator takes ``page_size`` are asked for pages of one.
    listings = {
        "/api/v1/records": {"page_size": 1},
        "/api/v1/conflicts": {},
        "/api/v1/promotion-requests": {},
        "/api/v1/runs": {"page_size": 1},
        "/api/v1/obligations": {"page_size": 1},
        "/api/v1/deletion-receipts": {"page_size": 1},
        "/api/v1/audit-events": {},
    }
    for path, query in listings.items():
        page = assert_conforms(agent.get(path, query), path, "GET")
        assert set(page) == {"next", "previous", "results"}, path
        assert page["results"], path
    episodes = agent.get(f"/api/v1/runs/{run['id']}/episodes")
    page = assert_conforms(episodes, "/api/v1/runs/{run_id}/episodes", "GET")
    assert [e["content"] for e in page["results"]] == ["hello"]


def test_facts_and_history_answer_their_envelopes(agent):
    record = write(agent, subject="user:2", value="v1")
    write(agent, subject="user:2", value="v1", source__ref="interaction:2")
    facts = agent.get("/api/v1/facts", {"subject": "user:2"})
    assert assert_conforms(facts, "/api/v1/facts", "GET")["results"][0]["id"] == record["id"]
    as_of = agent.get("/api/v1/facts", {"subject": "user:2", "as_of": record["written_at"]})
    assert "deletions" in assert_conforms(as_of, "/api/v1/facts", "GET")
    history = agent.get(f"/api/v1/records/{record['id']}/history")
    assert assert_conforms(history, "/api/v1/records/{record_id}/history", "GET")["versions"]
    detail = agent.get(f"/api/v1/records/{record['id']}")
    assert assert_conforms(detail, "/api/v1/records/{record_id}", "GET")["provenance"]
    check = agent.post("/api/v1/facts/check", {"facts": [{"id": record["id"], "version": 1}]})
    assert assert_conforms(check, "/api/v1/facts/check", "POST")["stale"] == 0


def test_search_hits_have_one_shape_for_records_and_summaries(agent):
    record = write(agent, subject="user:3", value="zanzibar courier")
    summarise(agent, [record["id"]], text="zanzibar courier digest")
    drain()
    response = agent.post("/api/v1/search", {"query": "zanzibar courier"})
    hits = assert_conforms(response, "/api/v1/search", "POST")["results"]
    assert {hit["type"] for hit in hits} == {"record", "summary"}
    assert len({frozenset(hit) for hit in hits}) == 1, "every hit has the same keys"
    for hit in hits:
        # The key named by ``type`` is set and the other is null: no KeyError for either.
        other = "summary" if hit["type"] == "record" else "record"
        assert hit[hit["type"]] is not None
        assert hit[other] is None
    (summary_hit,) = (hit for hit in hits if hit["type"] == "summary")
    assert summary_hit["trust"] is None
    assert summary_hit["scope"] is None
    assert summary_hit["summary"]["sources"] == [{"type": "record", "id": record["id"]}]


def test_deletion_answers_its_dry_run_and_its_receipt(agent):
    record = write(agent, subject="user:4")
    path = "/api/v1/records/{record_id}"
    preview = agent.delete(f"/api/v1/records/{record['id']}?dry_run=true")
    assert assert_conforms(preview, path, "DELETE")["dry_run"] is True
    receipt = agent.delete(f"/api/v1/records/{record['id']}?reason=asked+by+the+user")
    body_ = assert_conforms(receipt, path, "DELETE")
    assert body_["reason"] == "asked by the user"
    detail = agent.get(f"/api/v1/deletion-receipts/{body_['id']}")
    assert_conforms(detail, "/api/v1/deletion-receipts/{receipt_id}", "GET")


def test_summaries_and_redaction_answer_their_shapes(agent):
    record = write(agent, subject="user:5", value={"card": "4111"})
    created = summarise(agent, [record["id"]])
    summary = assert_conforms(created, "/api/v1/summaries", "POST")
    shown = agent.get(f"/api/v1/summaries/{summary['id']}")
    assert assert_conforms(shown, "/api/v1/summaries/{summary_id}", "GET")["valid"] is True
    redacted = agent.post(
        f"/api/v1/records/{record['id']}/redact", {"fields": ["card"], "reason": "pci"}
    )
    assert redacted.status_code == 200, redacted.content[:500]
    assert_conforms(redacted, "/api/v1/records/{record_id}/redact", "POST")
    invalid = agent.get(f"/api/v1/summaries/{summary['id']}")
    assert assert_conforms(invalid, "/api/v1/summaries/{summary_id}", "GET")["valid"] is False


def test_erasures_answer_their_preview_result_and_job(agent, settings):
    write(agent, subject="user:6")
    path = "/api/v1/erasures"
    preview = agent.post(path, {"subject": "user:6", "reason": "request", "dry_run": True})
    assert assert_conforms(preview, path, "POST")["dry_run"] is True
    done = agent.post(path, {"subject": "user:6", "reason": "request"})
    assert assert_conforms(done, path, "POST")["totals"]
    write(agent, subject="user:7")
    settings.ERASURE_JOB_THRESHOLD_RECORDS = 0
    job = agent.post(path, {"subject": "user:7", "reason": "request"})
    assert job.status_code == 202, job.content[:500]
    queued = assert_conforms(job, path, "POST")
    followed = agent.get(queued["url"])
    assert_conforms(followed, "/api/v1/erasures/{job_id}", "GET")
    revoked = agent.post(
        "/api/v1/consents/consent-9/revoke", {"reason": "withdrawn", "force": True}
    )
    assert_conforms(revoked, "/api/v1/consents/{consent_ref}/revoke", "POST")


def test_problems_conform_too(agent):
    missing = agent.get("/api/v1/records/00000000-0000-0000-0000-000000000000")
    assert_conforms(missing, "/api/v1/records/{record_id}", "GET")
    unknown = agent.get("/api/v1/runs", {"bogus": "1"})
    assert_conforms(unknown, "/api/v1/runs", "GET")


def test_the_check_notices_a_body_unlike_its_schema():
    class Page:
        status_code = 200
        content = b'{"results": []}'  # no next, no previous

    with pytest.raises(AssertionError, match="next"):
        assert_conforms(Page(), "/api/v1/records", "GET")

    class Hit:
        status_code = 200
        content = b'{"results": [{"type": "summary", "summary": null}], "purpose": "context"}'

    with pytest.raises(AssertionError):
        assert_conforms(Hit(), "/api/v1/search", "POST")
