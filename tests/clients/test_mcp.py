"""``memoryconsole mcp`` driven by the official MCP client over a real stdio subprocess,
against the live server: every tool, its effect seen through the API, bad input as a tool
error, and the state flows (resume from a checkpoint, replay, a stale fact, a race)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from memoryconsole_client import MemoryConsole, NotFound, hit_id

from tests.processes import memoryconsole_command

from .conftest import LiveServer
from .test_client import memory, subject

if TYPE_CHECKING:
    # Imported where used: the SDK and its models take seconds to import, which every
    # collection of the suite (every test run) would pay.
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

pytestmark = pytest.mark.slow

TOOLS = {
    "remember",
    "recall",
    "read_facts",
    "check_facts",
    "forget",
    "start_run",
    "add_episode",
    "save_checkpoint",
    "latest_checkpoint",
    "open_obligation",
    "commit_obligation",
    "close_run",
}


def _server(live: LiveServer, token: str) -> StdioServerParameters:
    from mcp.client.stdio import StdioServerParameters

    command = Path(sys.executable).with_name("memoryconsole")
    return StdioServerParameters(
        command=str(command),
        args=["mcp"],
        env={
            "MEMORYCONSOLE_URL": live.url,
            "MEMORYCONSOLE_TOKEN": token,
            # The code under test, as the live server runs it (which inherits the environment).
            **{name: os.environ[name] for name in ("PYTHONPATH",) if name in os.environ},
        },
    )


def with_mcp(
    live: LiveServer, token: str | None = None, server: StdioServerParameters | None = None
) -> Callable[..., Any]:
    """Run a scenario against a stdio server: this suite's (``token``'s), or ``server``."""
    parameters = server or _server(live, token or live.token)

    def run(scenario: Callable[[Client], Awaitable[Any]]) -> Any:
        async def main() -> Any:
            from mcp import Client

            async with Client(parameters) as client:
                return await scenario(client)

        return asyncio.run(main())

    return run


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, f"{tool}: {result.content}"
    assert result.structured_content is not None
    return dict(result.structured_content)


def remember_args(who: str, **overrides: Any) -> dict[str, Any]:
    fields = memory(who, **overrides)
    return fields


def test_it_lists_tools_with_schemas_and_calls_each(live_api: LiveServer) -> None:
    who = subject()
    task = f"mcp-{uuid.uuid4().hex[:8]}"

    async def scenario(client: Client) -> dict[str, Any]:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(tools) >= TOOLS
        for name in TOOLS:
            assert tools[name].description, name
            schema = tools[name].input_schema
            assert schema["type"] == "object"
        assert set(tools["remember"].input_schema["required"]) >= {
            "source",
            "owner",
            "reason",
            "scope",
            "sensitivity",
            "retention",
            "key",
            "subject",
        }
        assert "token" not in json.dumps(tools["remember"].input_schema).lower()

        written = await call(client, "remember", **remember_args(who, content="ships with kestrel"))
        found = await call(
            client, "recall", query="kestrel", domain="commerce", task_type="checkout", subject=who
        )
        facts = await call(client, "read_facts", subject=who)
        checked = await call(client, "check_facts", facts=[{"id": written["id"], "version": 1}])
        run = await call(client, "start_run", task_id=task, owner="service:checkout")
        resumed = await call(client, "start_run", task_id=task, owner="service:checkout")
        await call(client, "add_episode", run_id=run["id"], role="tool", content="looked up")
        obligation = await call(
            client, "open_obligation", task_id=task, kind="charge", key=f"{task}:1:charge"
        )
        committed = await call(
            client, "commit_obligation", obligation_id=obligation["id"], result={"id": "ch_1"}
        )
        await call(client, "save_checkpoint", run_id=run["id"], step=1, state={"n": 1})
        latest = await call(client, "latest_checkpoint", run_id=run["id"])
        resource = await client.read_resource(
            f"memoryconsole://runs/{run['id']}/checkpoints/latest"
        )
        facts_resource = await client.read_resource(f"memoryconsole://subjects/{who}/facts")
        closed = await call(client, "close_run", run_id=run["id"])
        receipt = await call(client, "forget", record_id=written["id"], reason="user asked")
        return {
            "written": written,
            "found": found,
            "facts": facts,
            "checked": checked,
            "run": run,
            "resumed": resumed,
            "committed": committed,
            "latest": latest,
            "resource": resource.contents[0].text,
            "facts_resource": facts_resource.contents[0].text,
            "closed": closed,
            "receipt": receipt,
        }

    out = with_mcp(live_api)(scenario)
    assert [hit_id(h) for h in out["found"]["results"]] == [out["written"]["id"]]
    assert [f["value"] for f in out["facts"]["facts"]] == ["carrier_a"]
    assert out["checked"]["facts"][0]["current"] is True
    assert (out["resumed"]["id"], out["resumed"]["resumed"]) == (out["run"]["id"], True)
    assert out["committed"]["outcome"] == "committed"
    assert out["latest"]["checkpoint"]["state"] == {"n": 1}
    assert json.loads(out["resource"])["checkpoint"]["step"] == 1
    assert json.loads(out["facts_resource"])["facts"][0]["key"] == "shipping.preference"
    assert out["closed"]["state"] == "closed"
    assert out["receipt"]["id"]
    assert out["receipt"]["reason"] == "user asked"

    # The effects, seen through the API with the same credential.
    with MemoryConsole(live_api.url, live_api.token) as api:
        with pytest.raises(NotFound):
            api.records.get(out["written"]["id"])
        assert api.runs.get(out["run"]["id"])["state"] == "closed"
        [obligation] = api.obligations.list(task_id=task)
        assert obligation["result"] == {"id": "ch_1"}


def test_bad_input_and_api_errors_are_tool_errors(live_api: LiveServer) -> None:
    async def scenario(client: Client) -> list[Any]:
        missing = await client.call_tool("remember", {"key": "x"})
        invalid = await client.call_tool("remember", remember_args(subject(), sensitivity="secret"))
        absent = await client.call_tool("forget", {"record_id": str(uuid.uuid4())})
        alive = await call(client, "read_facts", subject=subject())  # the server still serves
        return [missing, invalid, absent, alive]

    missing, invalid, absent, alive = with_mcp(live_api)(scenario)
    assert missing.is_error
    assert invalid.is_error
    assert "sensitivity" in invalid.content[0].text
    assert absent.is_error
    assert "404" in absent.content[0].text
    assert alive["facts"] == []


def test_it_refuses_to_work_without_a_credential(live_api: LiveServer) -> None:
    async def scenario(client: Client) -> Any:
        return await client.call_tool("read_facts", {"subject": "user:1"})

    result = with_mcp(live_api, token="mc_revoked-or-wrong")(scenario)
    assert result.is_error
    assert "401" in result.content[0].text


# One host starts the server (each host's format is checked in tests/test_cli.py).
@pytest.mark.parametrize("host", ["vscode"])
def test_a_printed_host_configuration_starts_the_server_from_any_directory(
    live_api: LiveServer, tmp_path: Path, host: str
) -> None:
    # Printed from this checkout, as a user would, with the credential in the environment.
    printed = subprocess.run(
        [*memoryconsole_command(), "mcp", "--print-config", host, "--url", live_api.url],
        env={**os.environ, "MEMORYCONSOLE_TOKEN": live_api.token},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    config = json.loads(printed.stdout)
    entry = config["servers" if host == "vscode" else "mcpServers"]["memoryconsole"]
    assert Path(entry["command"]).is_absolute()
    # Started as a host starts it: the printed command, arguments and variables only (the SDK
    # passes on a few safe variables of its own, no PYTHONPATH), from another directory.
    from mcp.client.stdio import StdioServerParameters

    server = StdioServerParameters(
        command=entry["command"], args=entry["args"], env=entry["env"], cwd=tmp_path
    )

    async def scenario(client: Client) -> tuple[set[str], dict[str, Any]]:
        tools = {tool.name for tool in (await client.list_tools()).tools}
        return tools, await call(client, "read_facts", subject=subject())

    tools, facts = with_mcp(live_api, server=server)(scenario)
    assert tools >= TOOLS
    assert facts["facts"] == []  # the printed URL and credential reached the API


# --- the state flows, through MCP tools ---------------------------------------------------

STEPS = ("reserve", "charge", "ship")


async def agent_run(client: Client, task: str, *, stop_after: int | None = None) -> list[str]:
    """A three-step agent on MCP tools: resumes from the latest checkpoint; returns the steps
    it executed (``stop_after`` n: it dies after n steps, before anything else)."""
    run = await call(client, "start_run", task_id=task, owner="service:checkout")
    latest = (await call(client, "latest_checkpoint", run_id=run["id"]))["checkpoint"]
    step, state = (latest["step"], latest["state"]) if latest else (0, {"results": {}})
    executed: list[str] = []
    for index in range(step, len(STEPS)):
        name = STEPS[index]
        key = f"{task}:{index + 1}:{name}"
        obligation = await call(
            client, "open_obligation", task_id=task, kind=name, key=key, payload={"step": name}
        )
        if obligation["state"] == "committed":
            result = obligation["result"]
        else:
            executed.append(name)
            result = (
                await call(
                    client, "commit_obligation", obligation_id=obligation["id"], result={name: 1}
                )
            )["result"]
        state = {"results": {**state["results"], name: result}}
        await call(client, "save_checkpoint", run_id=run["id"], step=index + 1, state=state)
        if stop_after is not None and index + 1 == stop_after:
            return executed
    await call(client, "close_run", run_id=run["id"])
    return executed


def test_a_restarted_agent_resumes_from_its_checkpoint(live_api: LiveServer) -> None:
    calm, killed = f"calm-{uuid.uuid4().hex[:6]}", f"kill-{uuid.uuid4().hex[:6]}"
    mcp = with_mcp(live_api)
    assert mcp(lambda c: agent_run(c, calm)) == list(STEPS)
    assert mcp(lambda c: agent_run(c, killed, stop_after=2)) == ["reserve", "charge"]
    # A new MCP server process and session: nothing before the checkpoint runs again.
    assert mcp(lambda c: agent_run(c, killed)) == ["ship"]
    with MemoryConsole(live_api.url, live_api.token) as api:
        outcome = {
            task: (
                [r["state"] for r in api.runs.list(task_id=task)],
                [
                    (o["key"].split(":", 1)[1], o["result"])
                    for o in api.obligations.list(task_id=task)
                ],
            )
            for task in (calm, killed)
        }
    assert outcome[killed] == outcome[calm]
    assert outcome[calm][0] == ["closed"]


def test_a_replayed_step_is_not_redone(live_api: LiveServer) -> None:
    task = f"replay-{uuid.uuid4().hex[:6]}"

    async def scenario(client: Client) -> list[dict[str, Any]]:
        first = await call(client, "open_obligation", task_id=task, kind="charge", key=f"{task}:1")
        await call(client, "commit_obligation", obligation_id=first["id"], result={"id": "ch"})
        again = await call(client, "open_obligation", task_id=task, kind="charge", key=f"{task}:1")
        other = await call(client, "open_obligation", task_id=task, kind="charge", key=f"{task}:2")
        return [first, again, other]

    first, again, other = with_mcp(live_api)(scenario)
    assert (again["id"], again["state"], again["result"]) == (
        first["id"],
        "committed",
        {"id": "ch"},
    )
    assert other["id"] != first["id"]
    assert other["state"] == "pending"


def test_a_superseded_fact_is_reported_stale_with_the_current_one(live_api: LiveServer) -> None:
    """The design's stale-fact test through MCP tools: a fact the agent holds in context is
    superseded (a reviewer accepts a new value); check_facts says so and names the current
    version, which read_facts returns."""
    who = subject()

    async def write(client: Client) -> list[dict[str, Any]]:
        old = await call(client, "remember", **remember_args(who, value="carrier_a"))
        new = await call(client, "remember", **remember_args(who, value="carrier_b"))
        return [old, new]

    old, new = with_mcp(live_api)(write)
    assert new["outcome"] == "conflict"
    with MemoryConsole(live_api.url, live_api.review_token) as reviewer:
        reviewer.conflicts.resolve(
            new["conflict"], resolution="accept_new", reason="the customer changed carrier"
        )

    async def check(client: Client) -> list[dict[str, Any]]:
        checked = await call(client, "check_facts", facts=[{"id": old["id"], "version": 1}])
        facts = await call(client, "read_facts", subject=who)
        return [checked, facts]

    checked, facts = with_mcp(live_api)(check)
    [verdict] = checked["facts"]
    assert (verdict["current"], verdict["stale"], verdict["reason"]) == (False, True, "superseded")
    assert verdict["current_id"] == new["id"]
    assert checked["stale"] == 1
    assert [(f["id"], f["value"]) for f in facts["facts"]] == [(new["id"], "carrier_b")]


def test_the_fact_tools_ask_for_confirmed_values_before_an_irreversible_step(
    live_api: LiveServer,
) -> None:
    """A value just remembered is provisional: check_facts (confirmed by default) says it is
    not safe to act on, and read_facts with trust confirmed leaves it out."""
    who = subject()

    async def scenario(client: Client) -> list[dict[str, Any]]:
        written = await call(client, "remember", **remember_args(who, value="carrier_a"))
        checked = await call(client, "check_facts", facts=[{"id": written["id"]}])
        everything = await call(client, "read_facts", subject=who)
        confirmed = await call(client, "read_facts", subject=who, trust="confirmed")
        return [checked, everything, confirmed]

    checked, everything, confirmed = with_mcp(live_api)(scenario)
    [verdict] = checked["facts"]
    assert (verdict["current"], verdict["safe_to_act"]) == (True, False)
    assert verdict["unsafe_reasons"] == ["provisional"]
    assert checked["unsafe"] == 1
    assert [f["trust"] for f in everything["facts"]] == ["provisional"]
    assert confirmed["facts"] == []


def test_a_fact_forgotten_since_is_reported_not_current(live_api: LiveServer) -> None:
    who = subject()

    async def scenario(client: Client) -> dict[str, Any]:
        old = await call(client, "remember", **remember_args(who, value="carrier_a"))
        await call(client, "forget", record_id=old["id"])
        return await call(client, "check_facts", facts=[{"id": old["id"], "version": 1}])

    checked = with_mcp(live_api)(scenario)
    # The fact held in context is no longer current: the agent must not act on it.
    assert checked["facts"][0]["current"] is False


def test_exactly_one_of_racing_agents_commits(live_api: LiveServer) -> None:
    task = f"race-{uuid.uuid4().hex[:6]}"
    with MemoryConsole(live_api.url, live_api.token) as api:
        obligation = api.obligations.open(task_id=task, kind="charge", key=f"{task}:1")

    async def racer(n: int) -> dict[str, Any]:
        from mcp import Client

        async with Client(_server(live_api, live_api.token)) as client:
            return await call(
                client, "commit_obligation", obligation_id=obligation["id"], result={"worker": n}
            )

    async def race() -> list[dict[str, Any]]:
        return list(await asyncio.gather(*(racer(n) for n in range(4))))

    outcomes = asyncio.run(race())
    winners = [o for o in outcomes if o["outcome"] == "committed"]
    assert len(winners) == 1
    assert {json.dumps(o["result"]) for o in outcomes} == {json.dumps(winners[0]["result"])}
    assert sum(o["outcome"] == "lost_race" for o in outcomes) == 3
