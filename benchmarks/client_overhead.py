"""What the Python client and the MCP server add to an agent's calls, beside raw httpx.

    .venv/bin/python benchmarks/client_overhead.py [--calls 200] [--url URL --token TOKEN]

One server for every contender: by default a ``memoryconsole up`` of its own on a fresh
embedded database under a temporary ``MEMORYCONSOLE_HOME`` (or the server at ``--url``,
with an agent credential of default actions). The same three operations, with the same
bodies, through five ways in:

* **raw httpx**: an ``httpx.Client`` with keep-alive, the JSON built by hand (the baseline);
* **client**: ``MemoryConsole`` (sync), **async client**: ``AsyncMemoryConsole``;
* **MCP stdio**: the official MCP client calling ``memoryconsole mcp`` over a stdio
  subprocess (the tool call, the server's argument validation, its client call, the answer);
* **MCP HTTP**: the same over streamable HTTP (``memoryconsole mcp --transport http``).

Operations: **write** a record (``POST /api/v1/records`` / ``remember``; each call a new
subject, so each is a new fact), **search** a 200-record corpus (``POST /api/v1/search`` /
``recall``), **read facts** of a subject (``GET /api/v1/facts`` / ``read_facts``). Each POST
carries an ``Idempotency-Key`` whichever way it goes, so the server does the same work.

The calls are interleaved (each round calls every contender once per operation, in a
shuffled order) so load on the machine falls on all alike. Printed: p50 and p90 latency per
contender and operation, and the ratios of p50s: each contender to raw httpx, and each MCP
transport to the client. Target: the client within 1.2x of raw httpx p50 for search and
write.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AsyncExitStack, contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx
import httpx2
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from memoryconsole_client import AsyncMemoryConsole, MemoryConsole

from benchmarks.harness import Timing, progress, table

MEMORYCONSOLE = Path(sys.executable).with_name("memoryconsole")
CORPUS = 200
WORDS = ["kestrel", "ptarmigan", "quokka", "zephyr", "marmot", "heron", "lynx", "osprey"]
CONTENDERS = ["raw httpx", "client", "async client", "MCP stdio", "MCP HTTP"]
OPERATIONS = ["write", "search", "read facts"]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


@contextmanager
def own_server() -> Iterator[tuple[str, str]]:
    """``memoryconsole up`` on a fresh embedded database; its URL and an agent token."""
    home = Path(tempfile.mkdtemp(prefix="bench-client-"))
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env["MEMORYCONSOLE_HOME"] = str(home)
    port = _free_port()
    log = (home / "up.log").open("wb")
    progress(f"starting memoryconsole up on port {port} (home {home}) ...")
    up = subprocess.Popen(
        [str(MEMORYCONSOLE), "up", "--port", str(port), "--workers", "2"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while "Press Ctrl-C" not in (home / "up.log").read_text(errors="replace"):
            if up.poll() is not None or time.monotonic() > deadline:
                sys.exit("up did not start:\n" + (home / "up.log").read_text()[-3000:])
            time.sleep(0.5)

        def manage(*argv: str) -> str:
            done = subprocess.run(
                [str(MEMORYCONSOLE), *argv], env=env, capture_output=True, text=True, check=True
            )
            return done.stdout.strip().splitlines()[-1]

        manage("create-tenant", "bench")
        yield url, manage("create-token", "bench", "--name", "bench-agent")
    finally:
        up.send_signal(signal.SIGINT)
        try:
            up.wait(30)
        except subprocess.TimeoutExpired:
            up.kill()
        log.close()


def memory(subject: str, content: str) -> dict[str, Any]:
    return {
        "key": "bench.note",
        "subject": subject,
        "value": content,
        "content": content,
        "source": {"kind": "interaction", "ref": f"interaction:{uuid.uuid4().hex[:8]}"},
        # Now: a lifetime counts from observed_at, so a fixed date would expire.
        "observed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "owner": "service:bench",
        "reason": "client overhead benchmark",
        "scope": {"domain": "bench"},
        "sensitivity": "internal",
        "retention": {"basis": "contract", "ttl": "P30D"},
    }


def search_body(word: str) -> dict[str, Any]:
    # What ``recall`` sends for (query, domain): the same body for every contender.
    return {"query": word, "scope": {"domain": "bench"}, "purpose": "context", "top_k": 10}


class Contenders:
    """Each way in, as three calls: ``write(body)``, ``search(word)``, ``facts(subject)``."""

    def __init__(self, url: str, token: str) -> None:
        self.url, self.token = url, token
        self.stack = AsyncExitStack()
        self.calls: dict[str, dict[str, Callable[[Any], Awaitable[Any]]]] = {}

    async def __aenter__(self) -> Contenders:
        auth = {"Authorization": f"Bearer {self.token}"}
        # The client's own headers too: the same request on the wire, built by hand.
        same = {**auth, "Accept": "application/json", "User-Agent": "memoryconsole-client/0.1"}
        raw = self.stack.enter_context(httpx.Client(base_url=self.url, headers=same, timeout=30))

        async def raw_write(body: dict[str, Any]) -> Any:
            headers = {"Idempotency-Key": str(uuid.uuid4())}
            response = raw.post("/api/v1/records", json=body, headers=headers)
            response.raise_for_status()
            return response.json()

        async def raw_search(word: str) -> Any:
            headers = {"Idempotency-Key": str(uuid.uuid4())}
            response = raw.post("/api/v1/search", json=search_body(word), headers=headers)
            response.raise_for_status()
            return response.json()

        async def raw_facts(subject: str) -> Any:
            response = raw.get("/api/v1/facts", params={"subject": subject})
            response.raise_for_status()
            return response.json()

        self.calls["raw httpx"] = {
            "write": raw_write,
            "search": raw_search,
            "read facts": raw_facts,
        }

        sync = self.stack.enter_context(MemoryConsole(self.url, self.token))

        async def client_write(body: dict[str, Any]) -> Any:
            return sync.records.write(**body)

        async def client_search(word: str) -> Any:
            return sync.search(word, scope={"domain": "bench"}, purpose="context", top_k=10)

        async def client_facts(subject: str) -> Any:
            return list(sync.facts.list(subject))

        self.calls["client"] = {
            "write": client_write,
            "search": client_search,
            "read facts": client_facts,
        }

        aio = await self.stack.enter_async_context(AsyncMemoryConsole(self.url, self.token))

        async def async_write(body: dict[str, Any]) -> Any:
            return await aio.records.write(**body)

        async def async_search(word: str) -> Any:
            return await aio.search(word, scope={"domain": "bench"}, purpose="context", top_k=10)

        async def async_facts(subject: str) -> Any:
            return [fact async for fact in aio.facts.list(subject)]

        self.calls["async client"] = {
            "write": async_write,
            "search": async_search,
            "read facts": async_facts,
        }

        stdio = StdioServerParameters(
            command=str(MEMORYCONSOLE),
            args=["mcp"],
            env={"MEMORYCONSOLE_URL": self.url, "MEMORYCONSOLE_TOKEN": self.token},
        )
        self.calls["MCP stdio"] = _tools(await self.stack.enter_async_context(Client(stdio)))

        port = _free_port()
        server = subprocess.Popen(
            [str(MEMORYCONSOLE), "mcp", "--transport", "http", "--port", str(port)],
            env={"PATH": os.environ.get("PATH", ""), "MEMORYCONSOLE_URL": self.url},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.stack.callback(server.wait, 10)
        self.stack.callback(server.terminate)
        deadline = time.monotonic() + 60
        while not _listening(port):
            if server.poll() is not None or time.monotonic() > deadline:
                sys.exit("memoryconsole mcp --transport http did not start")
            time.sleep(0.2)
        http = await self.stack.enter_async_context(
            httpx2.AsyncClient(headers=auth, timeout=httpx2.Timeout(30, read=120))
        )
        transport = streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http)
        self.calls["MCP HTTP"] = _tools(await self.stack.enter_async_context(Client(transport)))
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stack.aclose()


def _tools(client: Client) -> dict[str, Callable[[Any], Awaitable[Any]]]:
    async def tool(name: str, **arguments: Any) -> Any:
        result = await client.call_tool(name, arguments)
        if result.is_error:
            raise RuntimeError(f"{name}: {result.content}")
        return result.structured_content

    async def write(body: dict[str, Any]) -> Any:
        return await tool("remember", **body)

    async def search(word: str) -> Any:
        return await tool("recall", query=word, domain="bench")

    async def facts(subject: str) -> Any:
        return await tool("read_facts", subject=subject)

    return {"write": write, "search": search, "read facts": facts}


async def run(url: str, token: str, calls: int, warmup: int) -> dict[tuple[str, str], Timing]:
    rng = random.Random(7)  # noqa: S311 - an order of calls, not a secret
    with MemoryConsole(url, token) as loader:
        progress(f"loading {CORPUS} records to search ...")
        subjects = [f"user:bench-{n}" for n in range(CORPUS)]
        for n, who in enumerate(subjects):
            word = WORDS[n % len(WORDS)]
            loader.records.write(**memory(who, f"note {n}: seen a {word} near the {n}th gate"))
    seconds: dict[tuple[str, str], list[float]] = {
        (c, o): [] for c in CONTENDERS for o in OPERATIONS
    }
    async with Contenders(url, token) as contenders:
        for round_ in range(warmup + calls):
            order = CONTENDERS[:]
            rng.shuffle(order)
            for contender in order:
                for operation in OPERATIONS:
                    if operation == "write":
                        argument: Any = memory(f"user:w-{uuid.uuid4().hex[:10]}", "a fresh note")
                    elif operation == "search":
                        argument = rng.choice(WORDS)
                    else:
                        argument = rng.choice(subjects)
                    call = contenders.calls[contender][operation]
                    started = time.perf_counter()
                    answer = await call(argument)
                    elapsed = time.perf_counter() - started
                    if operation == "search" and not answer["results"]:
                        raise RuntimeError(f"{contender}: the search found nothing")
                    if round_ >= warmup:
                        seconds[(contender, operation)].append(elapsed)
            if (round_ + 1) % 20 == 0:
                progress(f"round {round_ + 1}/{warmup + calls}")
    return {key: Timing(" ".join(key), values, sum(values)) for key, values in seconds.items()}


def report(timings: dict[tuple[str, str], Timing], calls: int) -> str:
    rows = []
    for operation in OPERATIONS:
        raw = timings[("raw httpx", operation)].p50_ms
        client = timings[("client", operation)].p50_ms
        for contender in CONTENDERS:
            t = timings[(contender, operation)]
            versus_client = f"{t.p50_ms / client:.2f}x" if contender.startswith("MCP") else ""
            rows.append(
                [
                    operation,
                    contender,
                    t.p50_ms,
                    t.percentile(90) * 1000,
                    f"{t.p50_ms / raw:.2f}x",
                    versus_client,
                ]
            )
    headers = ["operation", "way in", "p50 ms", "p90 ms", "p50 / raw httpx", "p50 / client"]
    lines = [f"{calls} calls per way in and operation, interleaved", table(headers, rows), ""]
    for operation in ("search", "write"):
        ratio = timings[("client", operation)].p50_ms / timings[("raw httpx", operation)].p50_ms
        verdict = "met" if ratio <= 1.2 else "NOT met"
        lines.append(f"client {operation}: {ratio:.2f}x raw httpx p50 (target <= 1.2x: {verdict})")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="measured calls per cell")
    parser.add_argument("--warmup", type=int, default=10, help="unmeasured rounds first")
    parser.add_argument("--url", help="a running server (default: start one)")
    parser.add_argument("--token", help="an agent credential of --url's server")
    args = parser.parse_args()
    logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per request otherwise
    if args.url and not args.token:
        parser.error("--url needs --token")
    if args.url:
        timings = asyncio.run(run(args.url.rstrip("/"), args.token, args.calls, args.warmup))
    else:
        with own_server() as (url, token):
            timings = asyncio.run(run(url, token, args.calls, args.warmup))
    print(report(timings, args.calls))
    print(json.dumps({"load_average": os.getloadavg()}))


if __name__ == "__main__":
    main()
