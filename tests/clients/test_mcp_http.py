"""``memoryconsole mcp --transport http`` driven by the official MCP client over streamable
HTTP, against the live server: tools listed, a write, a search, an API error as a tool error
with the problem's detail; and the credential: the request's bearer token is the only one the
server uses, a missing or refused one is a ``401`` before any tool runs, an MCP session
answers only the credential that opened it, and one tenant's credential never reaches
another tenant's data through it."""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
import uuid
from collections.abc import Awaitable, Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import httpx2
import pytest
from memoryconsole_client import MemoryConsole, NotFound, hit_id

from tests.processes import free_port, listening, memoryconsole_command, wait_ready

from .conftest import LiveServer
from .test_client import memory, subject
from .test_mcp import TOOLS, call

if TYPE_CHECKING:
    from mcp import Client  # imported where used: test_mcp.py says why

pytestmark = pytest.mark.slow


def _serve_mcp(api_url: str, log: Path) -> Iterator[str]:
    """``memoryconsole mcp --transport http`` for the API at ``api_url``; its /mcp URL."""
    port = free_port()
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [*memoryconsole_command(), "mcp", "--transport", "http", "--port", str(port)],
            env={"PATH": "/usr/bin:/bin", "MEMORYCONSOLE_URL": api_url},
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_ready(
            lambda: listening(port),
            what=f"memoryconsole mcp --transport http on port {port}",
            process=process,
            log=lambda: log.read_text(errors="replace"),
        )
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="module")
def mcp_url(live_api: LiveServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from _serve_mcp(live_api.url, tmp_path_factory.mktemp("mcp-http") / "mcp.log")


def with_http(url: str, token: str | None) -> Callable[..., Any]:
    """Run ``scenario(client)`` in an MCP session over streamable HTTP with ``token``."""

    def run(scenario: Callable[[Client], Awaitable[Any]]) -> Any:
        async def main() -> Any:
            from mcp import Client
            from mcp.client.streamable_http import streamable_http_client

            headers = {"Authorization": f"Bearer {token}"} if token else {}
            timeout = httpx2.Timeout(30, read=120)
            async with (
                httpx2.AsyncClient(headers=headers, timeout=timeout) as http,
                Client(streamable_http_client(url, http_client=http)) as client,
            ):
                return await scenario(client)

        return asyncio.run(main())

    return run


def test_it_lists_tools_writes_and_searches_over_http(live_api: LiveServer, mcp_url: str) -> None:
    who = subject()

    async def scenario(client: Client) -> dict[str, Any]:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        written = await call(client, "remember", **memory(who, content="ships with ptarmigan"))
        found = await call(
            client,
            "recall",
            query="ptarmigan",
            domain="commerce",
            task_type="checkout",
            subject=who,
        )
        return {"tools": tools, "written": written, "found": found}

    out = with_http(mcp_url, live_api.token)(scenario)
    assert set(out["tools"]) >= TOOLS
    assert "token" not in json.dumps(out["tools"]["remember"].input_schema).lower()
    assert [hit_id(h) for h in out["found"]["results"]] == [out["written"]["id"]]
    with MemoryConsole(live_api.url, live_api.token) as api:
        stored = api.records.get(out["written"]["id"])
    assert (stored["subject"], stored["value"]) == (who, "carrier_a")
    # Stamped with the credential that sent the bearer header, as a direct API write is.
    with MemoryConsole(live_api.url, live_api.token) as api:
        assert stored["writer"]["id"] == api.me()["id"]


def test_an_api_error_is_a_tool_error_with_the_problem(live_api: LiveServer, mcp_url: str) -> None:
    async def scenario(client: Client) -> list[Any]:
        # Valid for the tool's schema, refused by the API: observed in the future.
        future = memory(subject(), observed_at="2999-01-01T00:00:00Z")
        invalid = await client.call_tool("remember", future)
        missing = await client.call_tool("forget", {"record_id": str(uuid.uuid4())})
        alive = await call(client, "read_facts", subject=subject())
        return [invalid, missing, alive]

    invalid, missing, alive = with_http(mcp_url, live_api.token)(scenario)
    assert invalid.is_error
    text = invalid.content[0].text
    assert "400" in text
    assert "observed_at" in text  # the failing field, from the problem's errors
    assert missing.is_error
    assert "404" in missing.content[0].text
    assert alive["facts"] == []  # the server still serves after both


def _initialize(url: str, token: str | None) -> httpx.Response:
    headers = {"Accept": "application/json, text/event-stream"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"},
        },
    }
    return httpx.post(url, json=message, headers=headers, timeout=30)


def test_a_request_without_an_accepted_credential_is_refused(
    live_api: LiveServer, mcp_url: str
) -> None:
    for token in (None, "mc_not-a-token"):
        refused = _initialize(mcp_url, token)
        assert refused.status_code == 401, (token, refused.text)
        assert refused.headers["WWW-Authenticate"].startswith("Bearer")
        assert "mcp-session-id" not in refused.headers
    assert _initialize(mcp_url, live_api.token).status_code == 200


def test_a_session_answers_only_the_credential_that_opened_it(
    live_api: LiveServer, mcp_url: str
) -> None:
    opened = _initialize(mcp_url, live_api.token)
    session = opened.headers["mcp-session-id"]

    def notify(token: str) -> int:
        headers = {
            "Accept": "application/json, text/event-stream",
            "Authorization": f"Bearer {token}",
            "Mcp-Session-Id": session,
            "MCP-Protocol-Version": "2025-06-18",
        }
        message = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        return httpx.post(mcp_url, json=message, headers=headers, timeout=30).status_code

    # Another tenant's credential (and another credential of the same tenant) presenting the
    # session id is answered as if there were no such session.
    assert notify(live_api.other_token) == 404
    assert notify(live_api.default_token) == 404
    assert notify(live_api.token) == 202


def test_one_tenant_never_reaches_another_tenants_data(live_api: LiveServer, mcp_url: str) -> None:
    who, task = subject(), f"private-{uuid.uuid4().hex[:8]}"

    async def owner(client: Client) -> dict[str, Any]:
        written = await call(client, "remember", **memory(who, content="ships with quokka"))
        run = await call(client, "start_run", task_id=task, owner="service:checkout")
        await call(client, "save_checkpoint", run_id=run["id"], step=1, state={"secret": "s1"})
        obligation = await call(
            client, "open_obligation", task_id=task, kind="charge", key=f"{task}:1"
        )
        return {"record": written["id"], "run": run["id"], "obligation": obligation["id"]}

    mine = with_http(mcp_url, live_api.token)(owner)

    async def rival(client: Client) -> dict[str, Any]:
        async def refused(tool: str, **arguments: Any) -> str:
            result = await client.call_tool(tool, arguments)
            assert result.is_error, (tool, result.structured_content)
            return str(result.content[0].text)

        facts = await call(client, "read_facts", subject=who)
        found = await call(
            client, "recall", query="quokka", domain="commerce", task_type="checkout"
        )
        errors = {
            "forget": await refused("forget", record_id=mine["record"]),
            "latest_checkpoint": await refused("latest_checkpoint", run_id=mine["run"]),
            "save_checkpoint": await refused(
                "save_checkpoint", run_id=mine["run"], step=2, state={}
            ),
            "add_episode": await refused(
                "add_episode", run_id=mine["run"], role="tool", content="x"
            ),
            "commit_obligation": await refused(
                "commit_obligation", obligation_id=mine["obligation"], result={"stolen": True}
            ),
            "close_run": await refused("close_run", run_id=mine["run"]),
        }
        same_key = await call(
            client, "open_obligation", task_id=task, kind="charge", key=f"{task}:1"
        )
        resource = await client.read_resource(f"memoryconsole://subjects/{who}/facts")
        return {
            "facts": facts,
            "found": found,
            "errors": errors,
            "same_key": same_key,
            "resource": resource.contents[0].text,
        }

    theirs = with_http(mcp_url, live_api.other_token)(rival)
    assert theirs["facts"]["facts"] == []
    assert mine["record"] not in {hit_id(h) for h in theirs["found"]["results"]}
    for tool, text in theirs["errors"].items():
        assert "404" in text, (tool, text)  # missing, not forbidden: nothing leaks
        assert "s1" not in text
    # The same obligation key in another tenant is that tenant's own obligation.
    assert theirs["same_key"]["id"] != mine["obligation"]
    assert json.loads(theirs["resource"])["facts"] == []

    with MemoryConsole(live_api.url, live_api.token) as api:
        assert api.records.get(mine["record"])["subject"] == who
        latest = api.checkpoints.latest(mine["run"])
        assert latest is not None
        assert latest["state"] == {"secret": "s1"}
        assert api.runs.get(mine["run"])["state"] == "open"
        assert api.obligations.get(mine["obligation"])["state"] == "pending"
    with MemoryConsole(live_api.url, live_api.other_token) as api, pytest.raises(NotFound):
        api.records.get(mine["record"])


def test_interleaved_sessions_of_two_tenants_keep_their_credentials(
    live_api: LiveServer, mcp_url: str
) -> None:
    """Both sessions on one server at once, calls interleaved: each write is stamped with
    the credential of its own session and each read sees its own tenant only."""
    subjects = {live_api.token: subject(), live_api.other_token: subject()}

    async def session(token: str) -> list[list[str]]:
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        headers = {"Authorization": f"Bearer {token}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=120)) as http,
            Client(streamable_http_client(mcp_url, http_client=http)) as client,
        ):
            seen = []
            for n in range(4):
                await call(client, "remember", **memory(subjects[token], key=f"mix.k{n}"))
                await asyncio.sleep(0)
                facts = {}
                for who in subjects.values():
                    facts[who] = await call(client, "read_facts", subject=who)
                seen.append(sorted(f["key"] for f in facts[subjects[token]]["facts"]))
                other = next(s for s in subjects.values() if s != subjects[token])
                assert facts[other]["facts"] == [], "a session read another tenant's facts"
            return seen

    async def both() -> list[list[list[str]]]:
        return list(await asyncio.gather(*(session(t) for t in subjects)))

    for seen in asyncio.run(both()):
        assert seen[-1] == [f"mix.k{n}" for n in range(4)]


# --- the credential check when the API cannot answer -----------------------------------------


class FakeApi(BaseHTTPRequestHandler):
    """``/api/v1/me`` that refuses every credential, and is unavailable for ``mc_down``."""

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""

    def do_GET(self) -> None:
        down = self.headers.get("Authorization") == "Bearer mc_down"
        status = 503 if down else 401
        body = json.dumps({"type": "about:blank", "title": "no", "status": status}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/problem+json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def mcp_before_fake_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    api = ThreadingHTTPServer(("127.0.0.1", 0), FakeApi)
    threading.Thread(target=api.serve_forever, daemon=True).start()
    log = tmp_path_factory.mktemp("mcp-fake") / "mcp.log"
    yield from _serve_mcp(f"http://127.0.0.1:{api.server_address[1]}", log)
    api.shutdown()


def test_an_unreachable_api_is_a_503_not_a_refused_credential(mcp_before_fake_api: str) -> None:
    answer = _initialize(mcp_before_fake_api, "mc_down")
    assert answer.status_code == 503
    assert answer.headers["Retry-After"]


def test_an_address_whose_credentials_keep_failing_is_slowed_down(
    mcp_before_fake_api: str,
) -> None:
    statuses = [_initialize(mcp_before_fake_api, f"mc_guess{n}").status_code for n in range(12)]
    assert statuses[:10] == [401] * 10
    assert statuses[10:] == [429, 429]
