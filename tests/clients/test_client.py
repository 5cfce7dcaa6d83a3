"""``memoryconsole-client`` against a live ``memoryconsole up``: every method, pagination,
retries that keep one effect, and one exception class per kind of error."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any

import httpx
import pytest
from memoryconsole_client import (
    AsyncMemoryConsole,
    BadRequest,
    Conflict,
    Forbidden,
    Gone,
    MemoryConsole,
    NotFound,
    RetryPolicy,
    TransportError,
    Unauthorized,
    Unprocessable,
    hit_id,
    hit_text,
    hit_type,
    record_hits,
    summary_hits,
)

from .conftest import LiveServer, free_port

pytestmark = pytest.mark.slow


def memory(subject: str, **overrides: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "key": "shipping.preference",
        "subject": subject,
        "value": "carrier_a",
        "source": {"kind": "interaction", "ref": f"interaction:{uuid.uuid4().hex[:8]}"},
        "observed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "owner": "user:alice",
        "reason": "applied in checkout flow",
        "scope": {"domain": "commerce", "task_type": "checkout"},
        "sensitivity": "personal",
        "retention": {"basis": "contract", "ttl": "P30D"},
    }
    fields.update(overrides)
    return fields


def subject() -> str:
    return f"user:{uuid.uuid4().hex[:10]}"


@pytest.fixture
def mc(live_api: LiveServer) -> Any:
    with MemoryConsole(live_api.url, live_api.token, timeout=15) as client:
        yield client


def test_records_from_write_to_delete(mc: MemoryConsole) -> None:
    who = subject()
    written = mc.records.write(**memory(who, value={"carrier": "dhl", "card": {"number": "4242"}}))
    assert (written["outcome"], written["trust"], written["version"]) == (
        "created",
        "provisional",
        1,
    )
    assert mc.records.get(written["id"])["value"]["carrier"] == "dhl"

    changed = mc.records.write(**memory(who, value={"carrier": "ups"}))
    assert changed["outcome"] == "conflict"
    assert [v["version"] for v in mc.records.history(written["id"])] == [1, 2]

    promotion = mc.records.request_promotion(
        written["id"], reason="the customer confirmed it", evidence={"ticket": "T-1"}
    )
    assert promotion["state"] == "open"
    redacted = mc.records.redact(written["id"], fields=["card.number"], reason="PCI")
    assert "card.number" in str(redacted)

    receipt = mc.records.delete(written["id"], reason="the customer asked")
    assert receipt["id"]
    assert receipt["reason"] == "the customer asked"
    with pytest.raises(NotFound):
        mc.records.get(written["id"])
    assert receipt["id"] in {r["id"] for r in mc.receipts.list()}
    assert mc.receipts.get(receipt["id"])["id"] == receipt["id"]

    # A batch answers each item; a refused one raises nothing and stores nothing.
    items = [memory(who, key="batch.a"), {**memory(who), "owner": None}]
    result = mc.records.write_batch(items, idempotency_key=f"batch-{who}")
    assert [item["status"] for item in result["items"]] == [201, 400]
    assert result["items"][0]["record"]["key"] == "batch.a"
    assert "owner" in result["items"][1]["error"]["errors"]
    assert mc.records.write_batch(items, idempotency_key=f"batch-{who}") == result


def test_listing_follows_every_page(live_api: LiveServer, mc: MemoryConsole) -> None:
    who = subject()
    keys = {f"pref.k{n}" for n in range(5)}
    for key in keys:
        mc.records.write(**memory(who, key=key))
    requests: list[str] = []

    def count(request: httpx.Request) -> None:
        requests.append(str(request.url))

    with MemoryConsole(live_api.url, live_api.token) as client:
        client._http.event_hooks["request"] = [count]  # observe the pages asked for
        listed = list(client.records.list(subject=who, page_size=2))
    assert {r["key"] for r in listed} == keys
    assert len(requests) == 3  # 2 + 2 + 1


def test_facts_search_and_summaries(mc: MemoryConsole) -> None:
    who = subject()
    first = mc.records.write(**memory(who, value="carrier_zephyr", content="ships with zephyr"))
    facts = list(mc.facts.list(who, domain="commerce"))
    assert [(f["key"], f["value"]) for f in facts] == [("shipping.preference", "carrier_zephyr")]
    [check] = mc.facts.check([{"id": first["id"], "version": 1}])
    assert check["current"] is True

    checkout = {"domain": "commerce", "task_type": "checkout"}
    hits = mc.search("zephyr", subject=who, scope=checkout)["results"]
    assert [hit_id(hit) for hit in hits] == [first["id"]]
    assert mc.search("nothing-matches-this-query", subject=who)["results"] == []

    summary = mc.summaries.create(
        text="prefers zephyr", sources=[{"type": "record", "id": first["id"]}], reason="digest"
    )
    assert mc.summaries.get(summary["id"])["valid"] is True

    # Now a summary ranks beside the record: the helpers read either kind of hit.
    both = mc.search("zephyr", subject=who, scope=checkout)
    assert {hit_type(h) for h in both["results"]} == {"record", "summary"}
    assert {hit_id(h) for h in both["results"]} == {first["id"], summary["id"]}
    assert [r["id"] for r in record_hits(both)] == [first["id"]]
    assert [s["text"] for s in summary_hits(both)] == ["prefers zephyr"]
    assert {hit_text(h) for h in both["results"]} == {"ships with zephyr", "prefers zephyr"}


def test_hits_are_read_whatever_their_type() -> None:
    """The shapes a search hit can take: a record hit, a summary hit without a ``record``
    key, one with ``record: null`` beside its summary (every hit with the same keys), an
    untyped one from an older server, and a type this client does not know."""
    record = {"id": "r1", "content": "ships with dhl"}
    summary = {"id": "s1", "text": "prefers dhl"}
    result = {
        "results": [
            {"type": "record", "record": record, "score": 1.0},
            {"type": "summary", "summary": summary, "score": 0.9},
            {"type": "summary", "record": None, "summary": summary, "score": 0.8},
            {"record": record, "score": 0.7},
            {"type": "episode", "score": 0.6},
        ]
    }
    hits = result["results"]
    assert [hit_type(h) for h in hits] == ["record", "summary", "summary", "record", "episode"]
    assert [hit_id(h) for h in hits] == ["r1", "s1", "s1", "r1", None]
    assert [hit_text(h) for h in hits] == [
        "ships with dhl",
        "prefers dhl",
        "prefers dhl",
        "ships with dhl",
        "",
    ]
    assert [r["id"] for r in record_hits(result)] == ["r1", "r1"]
    assert [s["id"] for s in summary_hits(result)] == ["s1", "s1"]
    assert record_hits({"results": []}) == []


def test_runs_episodes_checkpoints_and_obligations(mc: MemoryConsole) -> None:
    task = f"task-{uuid.uuid4().hex[:8]}"
    run = mc.runs.open(task_id=task, owner="service:checkout", idempotency_key=f"run:{task}")
    again = mc.runs.open(task_id=task, owner="service:checkout", idempotency_key=f"run:{task}")
    assert again["id"] == run["id"]
    assert [r["id"] for r in mc.runs.list(task_id=task)] == [run["id"]]
    assert mc.runs.get(run["id"])["state"] == "open"

    assert mc.checkpoints.latest(run["id"]) is None
    with pytest.raises(NotFound):  # no such run is not "no checkpoint yet"
        mc.checkpoints.latest(str(uuid.uuid4()))
    mc.episodes.add(run["id"], role="tool", content="charged")
    assert [e["content"] for e in mc.episodes.list(run["id"])] == ["charged"]

    opened = mc.obligations.open(task_id=task, kind="charge", key=f"{task}:1", payload={"n": 1})
    assert opened["created"] is True
    same = mc.obligations.open(task_id=task, kind="charge", key=f"{task}:1", payload={"n": 1})
    assert (same["id"], same["created"]) == (opened["id"], False)
    committed = mc.obligations.commit(opened["id"], result={"charge": "ch_1"})
    assert committed["state"] == "committed"
    with pytest.raises(Conflict) as refused:
        mc.obligations.commit(opened["id"], result={"charge": "ch_2"})
    assert refused.value.status == 409
    assert refused.value.body["result"] == {"charge": "ch_1"}
    assert mc.obligations.get(opened["id"])["result"] == {"charge": "ch_1"}
    assert [o["id"] for o in mc.obligations.list(task_id=task, state="committed")] == [opened["id"]]

    mc.checkpoints.save(run["id"], step=1, state={"done": ["charge"]})
    latest = mc.checkpoints.latest(run["id"])
    assert latest is not None
    assert (latest["step"], latest["state"]) == (1, {"done": ["charge"]})
    with pytest.raises(Conflict):
        mc.checkpoints.save(run["id"], step=0, state={})
    closed = mc.runs.close(run["id"])
    assert (closed["state"], closed["episodes_discarded"]) == ("closed", 1)


def test_review_decides_what_agents_wrote(live_api: LiveServer, mc: MemoryConsole) -> None:
    who = subject()
    first = mc.records.write(**memory(who, value="carrier_a"))
    contender = mc.records.write(**memory(who, value="carrier_b"))
    assert contender["outcome"] == "conflict"
    promotion = mc.records.request_promotion(first["id"], reason="the customer said so")
    with MemoryConsole(live_api.url, live_api.review_token) as reviewer:
        [conflict] = [c for c in reviewer.conflicts.list(state="open") if c["subject"] == who]
        assert (conflict["current"]["id"], conflict["contender"]["id"]) == (
            first["id"],
            contender["id"],
        )
        resolved = reviewer.conflicts.resolve(
            conflict["id"], resolution="keep_current", reason="the change was a typo"
        )
        assert (resolved["state"], resolved["resolution"]) == ("resolved", "keep_current")
        listed = [p["id"] for p in reviewer.promotion_requests.list(state="open")]
        assert promotion["id"] in listed
        approved = reviewer.promotion_requests.approve(promotion["id"], reason="confirmed by phone")
        assert approved["state"] == "approved"
        with pytest.raises(Conflict):  # decided already
            reviewer.promotion_requests.reject(promotion["id"], reason="second thoughts")
    assert mc.records.get(first["id"])["trust"] == "confirmed"
    # The writer cannot decide its own conflict (it wrote both versions).
    third = mc.records.write(**memory(who, value="carrier_c"))
    with pytest.raises(Forbidden):
        mc.conflicts.resolve(third["conflict"], resolution="accept_new", reason="mine")


def test_erasure_and_audit(mc: MemoryConsole) -> None:
    who = subject()
    record = mc.records.write(**memory(who))
    erased = mc.erasures.create(subject=who, reason="customer request")
    assert erased
    with pytest.raises(NotFound):
        mc.records.get(record["id"])
    actions = {e["action"] for e in mc.audit_events.list(page_size=20)}
    assert "record.write" in actions or any(a.startswith("record.") for a in actions), actions
    assert mc.me()["tenant"] == "acme"


def test_a_large_erasure_is_a_job_the_client_waits_for(mc: MemoryConsole) -> None:
    who = subject()
    records = [mc.records.write(**memory(who, key=f"erase.k{n}"))["id"] for n in range(5)]
    preview = mc.erasures.create(subject=who, reason="customer request", dry_run=True)
    assert preview["dry_run"] is True
    answer = mc.erasures.create(subject=who, reason="customer request")
    assert answer["state"] in ("queued", "running", "done")  # 202: more than the threshold
    job = mc.erasures.wait(answer, timeout=120, interval=0.5)
    assert job["state"] == "done", job
    assert job["progress"]["records_erased"] == 5
    for record_id in records:
        with pytest.raises(NotFound):
            mc.records.get(record_id)
    receipt = job["receipt"]
    children = list(mc.receipts.list(parent=receipt["id"], page_size=2))  # three pages
    assert len(children) == 5
    assert {r["parent"] for r in children} == {receipt["id"]}
    assert mc.receipts.get(receipt["id"])["id"] == receipt["id"]


def test_a_subjects_export_streams_what_the_tenant_holds(
    live_api: LiveServer, mc: MemoryConsole
) -> None:
    who = subject()
    written = mc.records.write(**memory(who))
    exported = list(mc.subjects.export(who))
    assert [item["type"] for item in exported] == [
        "header",
        "fact",
        *["audit_event"] * (len(exported) - 3),
        "end",
    ]
    assert exported[1]["versions"][0]["id"] == written["id"]

    # Another tenant holds nothing about the subject: the header and zero counts, nothing else.
    with MemoryConsole(live_api.url, live_api.other_token) as rival:
        assert [item["type"] for item in rival.subjects.export(who)] == ["header", "end"]

    async def exported_async() -> list[dict[str, Any]]:
        async with AsyncMemoryConsole(live_api.url, live_api.token) as client:
            return [item async for item in client.subjects.export(who)]

    assert [item["id"] for item in asyncio.run(exported_async())[1:2]] == [exported[1]["id"]]
    with MemoryConsole(live_api.url, live_api.default_token) as default, pytest.raises(Forbidden):
        list(default.subjects.export(who))  # no audit action


def test_an_export_cut_off_before_its_end_is_an_error() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        assert request.url.raw_path == b"/api/v1/subjects/user:a%2Fb/export"
        assert request.headers["Accept"] == "application/x-ndjson"
        return httpx.Response(200, content=b'{"type": "header"}\n{"type": "fact"}\n')

    transport = httpx.MockTransport(answer)
    with MemoryConsole("http://mc.test", "mc_x", transport=transport) as client:
        items = client.subjects.export("user:a/b")
        assert next(items)["type"] == "header"
        with pytest.raises(TransportError, match="before its end line"):
            list(items)


def test_each_error_is_its_own_class(live_api: LiveServer, mc: MemoryConsole) -> None:
    with MemoryConsole(live_api.url, "mc_not-a-token") as stranger, pytest.raises(Unauthorized):
        stranger.me()
    record = mc.records.write(**memory(subject()))
    with MemoryConsole(live_api.url, live_api.default_token) as plain, pytest.raises(Forbidden):
        plain.records.delete(record["id"])
    with MemoryConsole(live_api.url, live_api.other_token) as rival, pytest.raises(NotFound):
        rival.records.get(record["id"])  # another tenant's record is missing, not forbidden
    with pytest.raises(BadRequest) as invalid:
        mc.records.write(**memory(subject(), sensitivity="secret"))
    assert "sensitivity" in invalid.value.errors
    assert invalid.value.detail
    assert invalid.value.title
    key = f"k-{uuid.uuid4()}"
    mc.records.write(**memory(subject()), idempotency_key=key)
    with pytest.raises(Unprocessable):
        mc.records.write(**memory(subject()), idempotency_key=key)
    # A retry of a write whose record was deleted since: its own class, never a 201 that is
    # not a record.
    key, fields = f"k-{uuid.uuid4()}", memory(subject())
    written = mc.records.write(**fields, idempotency_key=key)
    mc.records.delete(written["id"])
    with pytest.raises(Gone) as gone:
        mc.records.write(**fields, idempotency_key=key)
    assert (gone.value.id, gone.value.state, gone.value.first_status) == (
        written["id"],
        "deleted",
        201,
    )


def test_previews_are_asked_for_explicitly() -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"id": "r", "dry_run": True})

    with MemoryConsole("http://mc.test", "mc_x", transport=httpx.MockTransport(answer)) as client:
        client.records.delete("abc", dry_run=True)
        client.erasures.create(subject="user:1", reason="asked", dry_run=True)
    assert seen[0].url.params["dry_run"] == "true"
    assert b'"dry_run":true' in seen[1].content.replace(b" ", b"")


def test_a_deletion_sends_its_reason_in_the_body_and_no_body_without_one() -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"id": "r"})

    with MemoryConsole("http://mc.test", "mc_x", transport=httpx.MockTransport(answer)) as client:
        client.records.delete("abc", reason="the customer asked")
        client.records.delete("abc")
    assert seen[0].method == "DELETE"
    assert json.loads(seen[0].content) == {"reason": "the customer asked"}
    assert seen[0].headers["Content-Type"] == "application/json"
    assert not seen[0].url.params
    assert seen[1].content == b""


def test_reads_carry_the_latest_write_position_the_server_answered() -> None:
    """Read-your-writes across read replicas (docs/api.md): each request sends the latest
    X-Memory-Position the client was answered, never an earlier one."""
    seen: list[httpx.Request] = []
    positions = iter(["0/3000148", "0/2FFFFFF", "1/00000010"])

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.method == "GET":
            return httpx.Response(200, json={"id": "r"})
        return httpx.Response(200, json={"id": "r"}, headers={"X-Memory-Position": next(positions)})

    with MemoryConsole("http://mc.test", "mc_x", transport=httpx.MockTransport(answer)) as client:
        client.records.get("r")
        for _ in range(3):
            client.records.delete("r")
            client.records.get("r")
    sent = [request.headers.get("X-Memory-Position") for request in seen]
    assert sent == [None, None, "0/3000148", "0/3000148", "0/3000148", "0/3000148", "1/00000010"]


class DropFirstResponse(httpx.BaseTransport):
    """Delivers the first POST to the server, then loses its answer, as a dropped connection
    would; records the idempotency keys sent."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.keys: list[str | None] = []
        self.dropped = False

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        if request.method == "POST":
            self.keys.append(request.headers.get("Idempotency-Key"))
            if not self.dropped:
                self.dropped = True
                response.read()
                raise httpx.RemoteProtocolError("connection dropped", request=request)
        return response


def test_a_retry_after_a_dropped_connection_has_one_effect(live_api: LiveServer) -> None:
    transport = DropFirstResponse()
    who = subject()
    with MemoryConsole(live_api.url, live_api.token, transport=transport) as client:
        written = client.records.write(**memory(who))
        assert written["version"] == 1
        [only] = client.records.list(subject=who)
    assert only["id"] == written["id"]
    assert len(transport.keys) == 2
    assert transport.keys[0] == transport.keys[1] is not None


def test_an_unreachable_server_is_a_transport_error() -> None:
    quick = RetryPolicy(retries=2, backoff=0.01)
    with (
        MemoryConsole(f"http://127.0.0.1:{free_port()}", "mc_x", retry=quick) as client,
        pytest.raises(TransportError),
    ):
        client.me()


def test_the_async_client_has_the_same_surface(live_api: LiveServer) -> None:
    async def scenario() -> None:
        who = subject()
        async with AsyncMemoryConsole(live_api.url, live_api.token) as client:
            for n in range(2):
                await client.records.write(**memory(who, key=f"async.k{n}"))
            batch = await client.records.write_batch([memory(who, key="async.k2")])
            assert (batch["succeeded"], batch["failed"]) == (1, 0)
            listed = [r async for r in client.records.list(subject=who, page_size=2)]
            assert len(listed) == 3
            facts = [f async for f in client.facts.list(who, page_size=2)]
            assert len(facts) == 3
            run = await client.runs.open(task_id=f"t-{who}", owner="service:checkout")
            assert await client.checkpoints.latest(run["id"]) is None
            with pytest.raises(NotFound):
                await client.records.get(str(uuid.uuid4()))
        async with AsyncMemoryConsole(live_api.url, live_api.review_token) as reviewer:
            # Listings are async iterators, page after page, like the sync ones' iterators.
            assert isinstance([c async for c in reviewer.conflicts.list()], list)
            assert isinstance([p async for p in reviewer.promotion_requests.list()], list)
        async with AsyncMemoryConsole(live_api.url, live_api.token) as auditor:
            assert isinstance([r async for r in auditor.receipts.list(page_size=2)], list)

    asyncio.run(scenario())


def test_both_clients_offer_the_same_methods() -> None:
    def surface(client_type: type) -> dict[str, set[str]]:
        client = client_type("http://127.0.0.1:1", "mc_x")
        groups = {n: v for n, v in vars(client).items() if not n.startswith("_")}
        found = {n: {m for m in dir(g) if not m.startswith("_")} for n, g in groups.items()}
        found[""] = {m for m in dir(client) if not m.startswith("_")} - set(groups)
        return found

    assert surface(MemoryConsole) == surface(AsyncMemoryConsole)
