"""``memoryconsole mcp``: Memory Console as Model Context Protocol tools and resources.

Every tool calls the agent REST API through ``memoryconsole-client``, so authentication,
row-level security, idempotency and audit are exactly the API's; no Django runs here. The
credential comes from ``MEMORYCONSOLE_TOKEN`` (stdio) or the request's ``Authorization:
Bearer`` header (streamable HTTP), never from a tool argument an LLM could fill in.

Over HTTP the SDK's bearer authentication guards ``/mcp``: a request without a credential
the API accepts is a ``401`` before any tool runs, and an MCP session is bound to the
credential that opened it (another credential presenting its session id is answered as if
the session did not exist). Each new credential is checked once with ``GET /api/v1/me`` and
remembered for ``CHECK_TTL`` seconds; the API still authorises every tool call itself, so a
revoked credential's calls fail at once. While the API cannot be reached the check answers
``503`` rather than calling the credential bad.

    memoryconsole mcp                                  # stdio, for a local agent
    memoryconsole mcp --transport http --port 8765     # streamable HTTP at /mcp
    memoryconsole mcp --print-config claude            # a host's configuration (mcp_hosts)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import sys
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any, Literal, TypeVar

import httpx
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from memoryconsole_client import (
    ApiError,
    AsyncMemoryConsole,
    Conflict,
    Forbidden,
    MemoryConsoleError,
    RetryPolicy,
    Unauthorized,
)
from pydantic import AnyHttpUrl, BaseModel, Field
from starlette.types import ASGIApp, Receive, Send
from starlette.types import Scope as ASGIScope

from apps.core.arguments import port_number
from memoryconsole import mcp_hosts

JSON = dict[str, Any]
T = TypeVar("T")

INSTRUCTIONS = (
    "Governed memory and state for this agent. Remember facts with their source, owner, "
    "reason, scope and sensitivity; recall them by scoped search; check facts held in your "
    "context before acting on them. Before an irreversible step, act only on facts that "
    "check_facts says are safe_to_act (confirmed, current, in no open conflict), or that "
    "recall with purpose decision returns without in_conflict. For multi-step work: "
    "start_run, open_obligation per step (the key makes it exactly-once), "
    "commit_obligation with the step's result, "
    "save_checkpoint after each step, and on restart resume from latest_checkpoint."
)


class Source(BaseModel):
    """Where the memory came from."""

    kind: Literal["interaction", "tool_call", "document", "user_action", "derived"]
    ref: str = Field(description="What it came from, e.g. interaction:4821 or order:17")
    turn_id: str | None = None
    tool_call_id: str | None = None
    run_id: str | None = Field(None, description="The run it was learnt in (needed for session)")


class Scope(BaseModel):
    """Where the fact holds; a fact in another scope is a different fact."""

    domain: str = Field(description="e.g. commerce")
    task_type: str | None = Field(None, description="e.g. checkout")
    conditions: dict[str, Any] | None = None


class Retention(BaseModel):
    """How long it may be kept."""

    basis: Literal["session", "consent", "contract", "indefinite"]
    ttl: str | None = Field(None, description="ISO 8601 duration, e.g. P30D")
    consent_ref: str | None = Field(None, description="Required with basis consent")


class FactRef(BaseModel):
    id: str = Field(description="The record id of the fact, as read")
    version: int | None = Field(None, description="The version held in context")


def _plain(model: BaseModel | None) -> JSON | None:
    return None if model is None else model.model_dump(exclude_none=True)


# How long a credential the API accepted (or refused) is taken as such without asking again.
CHECK_TTL = 30.0
REFUSED_TTL = 30.0
# Credentials remembered at once (checks, and one API client each); the oldest go first.
REMEMBERED = 512
# Failed checks a client address may cause per minute before it is refused without one: each
# failed check counts toward the API's throttle of failed authentications from *this*
# server's address, which would otherwise lock every agent behind it out.
FAILED_CHECKS_PER_MINUTE = 10
# A credential check is quick or it is not happening: the API is down or overloaded.
CHECK_RETRY = RetryPolicy(retries=1, backoff=0.1, max_backoff=0.5)


class ApiUnreachable(Exception):
    """The API could not say whether a credential is valid."""


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class Clients:
    """One API client per credential, over one shared connection pool. The client sends its
    credential with each request, so sharing the pool never mixes credentials; a client
    dropped from the bounded table is simply forgotten (it owns no connection)."""

    def __init__(self, base_url: str | None) -> None:
        self.base_url = base_url
        self.transport = httpx.AsyncHTTPTransport()
        self.by_token: OrderedDict[str, AsyncMemoryConsole] = OrderedDict()

    def get(self, token: str, retry: RetryPolicy | None = None) -> AsyncMemoryConsole:
        if retry is not None:  # one-off (credential checks): not remembered
            return AsyncMemoryConsole(self.base_url, token, retry=retry, transport=self.transport)
        key = _digest(token)
        client = self.by_token.get(key)
        if client is None:
            client = AsyncMemoryConsole(self.base_url, token, transport=self.transport)
            self.by_token[key] = client
            while len(self.by_token) > REMEMBERED:
                self.by_token.popitem(last=False)
        self.by_token.move_to_end(key)
        return client

    async def close(self) -> None:
        await self.transport.aclose()


class CredentialCheck:
    """The MCP SDK's token verifier, answering from what the API said of each credential
    (``GET /api/v1/me``): its id is the principal an MCP session is bound to, its actions the
    scopes. Answers are remembered briefly, refusals too."""

    def __init__(self, clients: Clients) -> None:
        self.clients = clients
        self.known: OrderedDict[str, tuple[float, AccessToken | None]] = OrderedDict()

    def remembered(self, token: str) -> tuple[bool, AccessToken | None]:
        entry = self.known.get(_digest(token))
        if entry is None or entry[0] < time.monotonic():
            return False, None
        return True, entry[1]

    async def check(self, token: str) -> AccessToken | None:
        """The credential's access, ``None`` if the API refuses it; ``ApiUnreachable``
        when the API cannot tell."""
        known, access = self.remembered(token)
        if known:
            return access
        try:
            me = await self.clients.get(token, retry=CHECK_RETRY).me()
        except (Unauthorized, Forbidden):
            self._remember(token, None, REFUSED_TTL)
            return None
        except MemoryConsoleError as error:
            raise ApiUnreachable(str(error)) from error
        access = AccessToken(
            token=token,
            client_id=str(me["id"]),
            scopes=[str(a) for a in me.get("actions", [])],
            subject=str(me.get("tenant", "")),
        )
        self._remember(token, access, CHECK_TTL)
        return access

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            return await self.check(token)
        except ApiUnreachable:
            return None  # the gate in front has answered 503 already; this is a late outage

    def _remember(self, token: str, access: AccessToken | None, ttl: float) -> None:
        key = _digest(token)
        self.known[key] = (time.monotonic() + ttl, access)
        self.known.move_to_end(key)
        while len(self.known) > REMEMBERED:
            self.known.popitem(last=False)


class CheckGate:
    """In front of the MCP app: checks a new bearer credential before the SDK's
    authentication does, to answer what the SDK cannot: ``503`` while the API is unreachable
    (not a ``401`` that would send the agent looking for another credential), and ``429`` for
    an address whose recent credentials kept failing (see ``FAILED_CHECKS_PER_MINUTE``)."""

    def __init__(self, app: ASGIApp, check: CredentialCheck) -> None:
        self.app, self.check = app, check
        self.failures: dict[str, list[float]] = {}

    async def __call__(self, scope: ASGIScope, receive: Receive, send: Send) -> None:
        token = _bearer(scope) if scope["type"] == "http" else None
        if token is None or self.check.remembered(token)[0]:
            await self.app(scope, receive, send)
            return
        address = str((scope.get("client") or ("?", 0))[0])
        now = time.monotonic()
        recent = [t for t in self.failures.get(address, []) if t > now - 60]
        if len(recent) >= FAILED_CHECKS_PER_MINUTE:
            await _answer(send, 429, "Too many failed credentials from this address.", 60)
            return
        try:
            access = await self.check.check(token)
        except ApiUnreachable:
            await _answer(send, 503, "Memory Console cannot be reached to check the credential.", 5)
            return
        if access is None:
            self.failures[address] = [*recent, now]
        await self.app(scope, receive, send)


def _bearer(scope: ASGIScope) -> str | None:
    for name, value in scope.get("headers") or []:
        if name.lower() == b"authorization":
            scheme, _, token = bytes(value).decode("latin-1").partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return str(token.strip())
    return None


async def _answer(send: Send, status: int, detail: str, retry_after: int) -> None:
    body = json.dumps(
        {
            "error": "unavailable" if status == 503 else "too_many_requests",
            "error_description": detail,
        }
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"retry-after", str(retry_after).encode()),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class Credentials:
    """The API client for a tool call: the environment's credential (stdio), or the one
    the SDK authenticated for this request (HTTP)."""

    def __init__(self, clients: Clients, from_header: bool) -> None:
        self.clients = clients
        self.from_header = from_header

    def client(self, ctx: Context) -> AsyncMemoryConsole:
        return self.clients.get(self._token(ctx))

    def _token(self, ctx: Context) -> str:
        if not self.from_header:
            token = os.environ.get("MEMORYCONSOLE_TOKEN", "")
            if not token:
                raise ToolError("no agent credential: set MEMORYCONSOLE_TOKEN for the server")
            return token
        access = get_access_token()
        if access is not None:
            return access.token
        # The SDK authenticated this request before it reached the tool; its header is the
        # credential it checked.
        headers = dict((ctx.headers or {}).items())
        scheme, _, token = (headers.get("authorization") or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise ToolError("no agent credential: send Authorization: Bearer <token>")
        return token.strip()


def _tool_error(error: MemoryConsoleError) -> ToolError:
    """The API's problem as a tool error the model can read and act on: status, title,
    detail, the failing fields, and the problem type."""
    if not isinstance(error, ApiError):
        return ToolError(f"Memory Console unreachable: {error}")
    problem = f"{error.status} {error.title}: {error.detail}"
    if error.errors:
        problem += " " + "; ".join(f"{k}: {', '.join(v)}" for k, v in error.errors.items())
    return ToolError(problem)


async def _api(call: Awaitable[T]) -> T:
    """The API's answer, or its problem as a tool error."""
    try:
        return await call
    except MemoryConsoleError as error:
        raise _tool_error(error) from error


async def _every(listing: AsyncIterator[T]) -> list[T]:
    """Every item of a paged listing (the client follows its pages), or its problem as a
    tool error."""
    try:
        return [item async for item in listing]
    except MemoryConsoleError as error:
        raise _tool_error(error) from error


def build_server(
    *, base_url: str | None = None, credential_from_header: bool = False
) -> tuple[MCPServer, CredentialCheck]:
    """The MCP server, its tools calling the API at ``base_url`` (default
    ``MEMORYCONSOLE_URL``), and its credential check (used over HTTP)."""
    api_url = base_url or os.environ.get("MEMORYCONSOLE_URL") or "http://127.0.0.1:8000"
    clients = Clients(api_url)
    credentials = Credentials(clients, credential_from_header)
    check = CredentialCheck(clients)

    @asynccontextmanager
    async def lifespan(_: MCPServer) -> AsyncIterator[None]:
        try:
            yield None
        finally:
            await clients.close()

    auth: dict[str, Any] = {}
    if credential_from_header:
        # Memory Console issues the credentials; no OAuth metadata is served (agents send a
        # token they were given), so there is no resource URL to advertise.
        auth = {
            "auth": AuthSettings(issuer_url=AnyHttpUrl(api_url), resource_server_url=None),
            "token_verifier": check,
        }
    server: MCPServer = MCPServer(
        "memoryconsole", instructions=INSTRUCTIONS, version="0.1.0", lifespan=lifespan, **auth
    )

    def tool(fn: Callable[..., Awaitable[JSON]]) -> Callable[..., Awaitable[JSON]]:
        return server.tool(name=fn.__name__, description=(fn.__doc__ or "").strip())(fn)

    @tool
    async def remember(
        ctx: Context,
        key: Annotated[str, Field(description="Dotted name of the fact, e.g. shipping.preference")],
        subject: Annotated[str, Field(description="Whom or what it is about, e.g. user:8812")],
        value: Annotated[Any, Field(description="The fact's value (any JSON)")],
        source: Source,
        observed_at: Annotated[
            str,
            Field(description="When observed, RFC 3339, not future; its lifetime counts from it"),
        ],
        owner: Annotated[str, Field(description="Accountable principal: user:<id> | service:<n>")],
        reason: Annotated[str, Field(description="Why this is worth remembering", min_length=1)],
        scope: Scope,
        sensitivity: Literal["public", "internal", "personal", "restricted"],
        retention: Retention,
        content: Annotated[str | None, Field(description="Text form (default: rendered)")] = None,
        idempotency_key: Annotated[
            str | None, Field(description="Reuse to make a retried write one write")
        ] = None,
    ) -> JSON:
        """Write a memory (a fact about a subject) with its provenance. It is stored
        provisional; a different value for an existing fact opens a conflict instead of
        overwriting (see outcome)."""
        client = credentials.client(ctx)
        written = await _api(
            client.records.write(
                key=key,
                subject=subject,
                value=value,
                source=_plain(source),  # type: ignore[arg-type]
                observed_at=observed_at,
                owner=owner,
                reason=reason,
                scope=_plain(scope),  # type: ignore[arg-type]
                sensitivity=sensitivity,
                retention=_plain(retention),  # type: ignore[arg-type]
                content=content,
                idempotency_key=idempotency_key,
            )
        )
        return dict(written)

    @tool
    async def recall(
        ctx: Context,
        query: Annotated[str, Field(description="What to look for, in words")],
        domain: Annotated[str, Field(description="Scope: only memories of this domain")],
        purpose: Annotated[
            Literal["context", "decision"],
            Field(
                description="decision: confirmed memories only, for acting on (one an open "
                "conflict contradicts says in_conflict: wait for a reviewer before an "
                "irreversible step)"
            ),
        ] = "context",
        task_type: Annotated[
            str | None,
            Field(
                description="The task at hand, e.g. email (memories of the "
                "domain in general apply too)"
            ),
        ] = None,
        conditions: Annotated[
            dict[str, Any] | None,
            Field(
                description="The conditions of the task; a memory observed under a subset "
                "of them applies"
            ),
        ] = None,
        subject: Annotated[str | None, Field(description="Only memories about this")] = None,
        top_k: Annotated[int, Field(ge=1, le=100)] = 10,
    ) -> JSON:
        """Search memories that apply to a task: in words or another language, by meaning
        and by words. A memory applies when its scope is contained in the task's (the
        domain's general memories reach every task of it). Each result says where it came
        from (source, provenance), its trust and when it expires. With no results,
        ``abstention`` says why (nothing in scope, only provisional, below the floor)."""
        scope: dict[str, Any] = {"domain": domain}
        if task_type:
            scope["task_type"] = task_type
        if conditions:
            scope["conditions"] = conditions
        found = await _api(
            credentials.client(ctx).search(
                query, scope=scope, purpose=purpose, subject=subject, top_k=top_k
            )
        )
        return dict(found)

    @tool
    async def read_facts(
        ctx: Context,
        subject: Annotated[str, Field(description="e.g. user:8812")],
        domain: str | None = None,
        task_type: str | None = None,
        as_of: Annotated[str | None, Field(description="RFC 3339: what was known then")] = None,
        trust: Annotated[
            Literal["provisional", "confirmed"] | None,
            Field(
                description="confirmed: only facts whose value is confirmed, what an "
                "irreversible step may act on (a provisional one is left out)"
            ),
        ] = None,
    ) -> JSON:
        """The current value of every fact about a subject (never superseded or expired),
        each with its trust, who confirmed it (confirmed_by) and whether an open conflict
        contradicts it (in_conflict: do not act on it irreversibly)."""
        facts = await _every(
            credentials.client(ctx).facts.list(
                subject, domain=domain, task_type=task_type, as_of=as_of, trust=trust
            )
        )
        return {"subject": subject, "facts": facts}

    @tool
    async def check_facts(
        ctx: Context,
        facts: Annotated[list[FactRef], Field(description="Facts held in context", min_length=1)],
        trust: Annotated[
            Literal["provisional", "confirmed"],
            Field(
                description="The least trust you will act on: confirmed (the default) before "
                "an irreversible step; provisional only for a step that can be undone"
            ),
        ] = "confirmed",
    ) -> JSON:
        """Before acting on facts from your context: whether each is still current and
        safe_to_act (current, in no open conflict, at least the trust asked for); if not,
        unsafe_reasons says why. A stale one names the current version (read it with
        read_facts)."""
        refs = [_plain(f) for f in facts]
        client = credentials.client(ctx)
        checked = await _api(client.facts.check(refs, trust=trust))  # type: ignore[arg-type]
        return {
            "facts": checked,
            "stale": sum(1 for c in checked if c.get("stale")),
            "unsafe": sum(1 for c in checked if not c.get("safe_to_act")),
        }

    @tool
    async def forget(
        ctx: Context,
        record_id: Annotated[str, Field(description="The memory's record id")],
        reason: Annotated[
            str | None,
            Field(description="Why it goes; kept on the deletion receipt", max_length=2000),
        ] = None,
    ) -> JSON:
        """Delete a memory and what was derived from it; returns the deletion receipt."""
        deleting = credentials.client(ctx).records.delete(record_id, reason=reason)
        return dict(await _api(deleting))

    @tool
    async def start_run(
        ctx: Context,
        task_id: Annotated[str, Field(description="The task; the same id resumes its run")],
        owner: Annotated[str, Field(description="Accountable principal, e.g. service:checkout")],
    ) -> JSON:
        """Start the run of a task, or resume it: an open run of the same task is returned
        (resumed: true) instead of a second one."""
        client = credentials.client(ctx)
        async for run in client.runs.list(task_id=task_id, state="open"):
            return {**run, "resumed": True}
        opened = await _api(
            client.runs.open(task_id=task_id, owner=owner, idempotency_key=f"run:{task_id}")
        )
        return {**opened, "resumed": False}

    @tool
    async def add_episode(
        ctx: Context,
        run_id: str,
        role: Annotated[str, Field(description="e.g. user, assistant, tool")],
        content: str,
        idempotency_key: Annotated[str | None, Field(description="Reuse: no duplicate")] = None,
    ) -> JSON:
        """Append a trace to an open run (discarded when the run closes)."""
        episode = credentials.client(ctx).episodes.add(
            run_id, role=role, content=content, idempotency_key=idempotency_key
        )
        return dict(await _api(episode))

    @tool
    async def save_checkpoint(
        ctx: Context,
        run_id: str,
        step: Annotated[int, Field(ge=0, description="Steps done so far")],
        state: Annotated[Any, Field(description="Everything needed to resume (any JSON)")],
    ) -> JSON:
        """Save the run's state after a step; a restarted agent resumes from the latest."""
        saved = credentials.client(ctx).checkpoints.save(run_id, step=step, state=state)
        return dict(await _api(saved))

    @tool
    async def latest_checkpoint(ctx: Context, run_id: str) -> JSON:
        """The run's latest checkpoint ({"checkpoint": null} before the first): resume from
        its step with its state."""
        latest = await _api(credentials.client(ctx).checkpoints.latest(run_id))
        return {"checkpoint": latest}

    @tool
    async def open_obligation(
        ctx: Context,
        task_id: str,
        kind: Annotated[str, Field(description="What the work is, e.g. charge")],
        key: Annotated[str, Field(description="Unique per step, e.g. <task>:<n>:<step>")],
        payload: Annotated[Any, Field(description="What the work is given")] = None,
        depends_on: Annotated[
            list[str] | None, Field(description="Obligation ids that must commit first")
        ] = None,
    ) -> JSON:
        """Open the obligation for one step of work, before doing it. The same key returns
        the existing one: if its state is committed, use its result and do not redo it."""
        opened = credentials.client(ctx).obligations.open(
            task_id=task_id, kind=kind, key=key, payload=payload, depends_on=depends_on
        )
        return dict(await _api(opened))

    @tool
    async def commit_obligation(
        ctx: Context,
        obligation_id: str,
        result: Annotated[Any, Field(description="What the work produced (any JSON)")],
        idempotency_key: Annotated[str | None, Field(description="Reuse on retry")] = None,
    ) -> JSON:
        """Record that the work is done, exactly once. outcome committed: yours stands;
        outcome lost_race: another commit won first, and result is the one to use."""
        client = credentials.client(ctx)
        try:
            committed = await client.obligations.commit(
                obligation_id, result=result, idempotency_key=idempotency_key
            )
        except Conflict as refused:
            body = refused.body if isinstance(refused.body, dict) else {}
            if body.get("state") != "committed":
                raise _tool_error(refused) from refused
            return {"outcome": "lost_race", "result": body.get("result"), "obligation": body}
        except MemoryConsoleError as error:
            raise _tool_error(error) from error
        return {"outcome": "committed", "result": committed["result"], "obligation": committed}

    @tool
    async def close_run(ctx: Context, run_id: str) -> JSON:
        """Close the run when the task is done: its episodes are discarded, facts stay."""
        return dict(await _api(credentials.client(ctx).runs.close(run_id)))

    @server.resource(
        "memoryconsole://subjects/{subject}/facts",
        name="facts",
        description="The current facts about a subject",
        mime_type="application/json",
    )
    async def subject_facts(subject: str, ctx: Context) -> JSON:
        facts = await _every(credentials.client(ctx).facts.list(subject))
        return {"subject": subject, "facts": facts}

    @server.resource(
        "memoryconsole://runs/{run_id}/checkpoints/latest",
        name="latest_checkpoint",
        description="A run's latest checkpoint",
        mime_type="application/json",
    )
    async def run_checkpoint(run_id: str, ctx: Context) -> JSON:
        return {"checkpoint": await _api(credentials.client(ctx).checkpoints.latest(run_id))}

    return server, check


def http_app(server: MCPServer, check: CredentialCheck, host: str) -> ASGIApp:
    """The streamable HTTP app at ``/mcp``, behind the credential gate."""
    return CheckGate(server.streamable_http_app(host=host), check)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="memoryconsole mcp", description=__doc__.splitlines()[0])
    parser.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=port_number, default=8765)
    parser.add_argument("--url", help="the API's address (default: $MEMORYCONSOLE_URL)")
    parser.add_argument(
        "--print-config",
        metavar="HOST",
        help="print the stdio configuration of a host (claude, cursor or vscode) and exit",
    )
    parser.add_argument(
        "--token", help="with --print-config: the agent credential (default: $MEMORYCONSOLE_TOKEN)"
    )
    args = parser.parse_args(argv)
    if args.print_config is not None or args.token is not None:
        if args.print_config is None:
            parser.exit(2, "memoryconsole mcp: --token goes with --print-config only\n")
        if args.transport != "stdio":
            parser.exit(2, "memoryconsole mcp: --print-config describes the stdio server only\n")
        sys.exit(mcp_hosts.print_config(args.print_config, url=args.url, token=args.token))
    # httpx logs each request's URL at INFO, query string and all (a subject, say): the API's
    # own access log drops query strings, and so does this server by not logging them.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    server, check = build_server(base_url=args.url, credential_from_header=args.transport == "http")
    if args.transport == "stdio":
        server.run("stdio")
        return
    import uvicorn

    # Open MCP streams would hold a graceful shutdown for ever; a client reconnects anyway.
    uvicorn.run(
        http_app(server, check, args.host),
        host=args.host,
        port=args.port,
        log_level="info",
        timeout_graceful_shutdown=3,
    )
