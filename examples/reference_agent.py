"""A reference agent that keeps its state in Memory Console, through ``memoryconsole-client``.

    export MEMORYCONSOLE_URL=http://127.0.0.1:8000 MEMORYCONSOLE_TOKEN=mc_...
    export FAKE_SERVICES_URL=http://127.0.0.1:8765      # python examples/fake_services.py
    python examples/reference_agent.py run --task-id order-1001 [--journal agent.jsonl]
    python examples/reference_agent.py race --task-id order-1002 --key order-1002:charge --worker 3
    python examples/reference_agent.py stale --task-id order-1003 --fact '{"id": ..., "version": 1}'

No Django and no hand-built API requests: every call to Memory Console goes through the
client (so its retries, idempotency keys and typed errors are the ones an agent gets); only
the outside world (the fake payment, email and shipping services) is plain HTTP. The agent
fulfils an order in steps with external side effects (reserve stock, charge, email a
receipt, ship, then record the outcome as a fact) and survives ``kill -9`` at any point: run
it again and it finishes with the outcome and the side effects of a run never interrupted.

Its memory is a record, not a cache. It never asks "do I remember doing this?" of a search;
it asks the ledger:

* **the run** is found again by task id (opened with ``Idempotency-Key: run:<task>``);
* **a checkpoint** after each step holds the results so far, and a restarted agent resumes
  after the latest one: the steps before it are not looked at again;
* **each step is an obligation** whose key is ``<task>:<step number>:<step name>``. Before
  acting, the agent opens it (the same key returns the existing one): if it is already
  committed (done before a crash, after the last checkpoint), its result is reused and
  nothing is done again;
* **the side effect carries the obligation key** as its idempotency key, so a crash between
  the effect and the commit (the one window no ledger can close) is retried without a second
  effect;
* **the commit is exactly once**: a ``Conflict`` carries the winner's result, which the agent
  uses.

``stale`` shows the other half of the design: before acting on a fact from its context the
agent asks ``facts.check`` whether it is still current, and acts on the current version if not;
and, since shipping cannot be undone, only on a confirmed value in no open conflict
(``safe_to_act``): a provisional or disputed one blocks the step.

``--journal PATH`` appends one JSON line per thing the agent did (started and from which
checkpoint, opened a step's obligation, acted, committed, checkpointed, finished), each with
one ``write`` so it is on disk even when the process is killed right after.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from memoryconsole_client import Conflict, MemoryConsole, RetryPolicy

JSON = dict[str, Any]
# A database or web worker being restarted is waited for (the API answers 503 with
# Retry-After meanwhile), for a minute or so, rather than failing the task.
PATIENT = RetryPolicy(retries=60, backoff=0.05, max_backoff=1.0)


class CrashPoint:
    """Crash testing: with ``REFERENCE_AGENT_DIE_AT=K`` the agent SIGKILLs itself at the K-th
    point of its HTTP traffic (counting from 0; point 2i is just before sending request i,
    2i+1 just after receiving its answer, before acting on it)."""

    def __init__(self) -> None:
        raw = os.environ.get("REFERENCE_AGENT_DIE_AT", "")
        self.target = int(raw) if raw else None
        self.count = 0

    def tick(self) -> None:
        if self.target is not None and self.count == self.target:
            os.kill(os.getpid(), signal.SIGKILL)
        self.count += 1


CRASH = CrashPoint()


class CrashingTransport(httpx.BaseTransport):
    """The agent's HTTP transport: the crash points around every request (Memory Console's
    and the outside world's), and the ``--jitter-ms`` pause that spreads them."""

    def __init__(self, jitter: float = 0.0) -> None:
        self.inner = httpx.HTTPTransport()
        self.jitter = jitter

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if self.jitter:
            time.sleep(random.uniform(0, self.jitter))  # noqa: S311 - not crypto
        CRASH.tick()
        response = self.inner.handle_request(request)
        response.read()
        CRASH.tick()
        return response

    def close(self) -> None:
        self.inner.close()


class Journal:
    """What this process did, one JSON line per event (nothing without a path)."""

    def __init__(self, path: str | None = None) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644) if path else None

    def note(self, event: str, **fields: Any) -> None:
        if self.fd is None:
            return
        line = json.dumps({"event": event, "pid": os.getpid(), **fields}, sort_keys=True)
        os.write(self.fd, (line + "\n").encode())  # one write: a line is whole or absent


class Services:
    """The outside world, where side effects happen. Every call carries the step's
    obligation key as its ``Idempotency-Key``, so a call repeated after a crash is answered
    with the first result instead of acting twice."""

    def __init__(self, base_url: str, transport: httpx.BaseTransport | None = None) -> None:
        self.http = httpx.Client(base_url=base_url, transport=transport, timeout=30)

    def call(self, target: str, body: JSON, key: str) -> JSON:
        delay = 0.02
        for _ in range(60):
            try:
                response = self.http.post(f"/{target}", json=body, headers={"Idempotency-Key": key})
            except httpx.TransportError:
                response = None
            if response is not None and response.status_code < 500:
                response.raise_for_status()
                answer: JSON = response.json()
                return answer
            time.sleep(delay)
            delay = min(delay * 2, 1.0)
        raise RuntimeError(f"{target}: the service did not answer")


@dataclass
class Agent:
    """The agent's two connections: Memory Console (``memory``, its state) and the outside
    world (``services``), and its journal."""

    memory: MemoryConsole
    services: Services
    journal: Journal = field(default_factory=Journal)

    @classmethod
    def from_env(cls, jitter_ms: float = 0.0, journal: str | None = None) -> Agent:
        """``MEMORYCONSOLE_URL``, ``MEMORYCONSOLE_TOKEN`` and ``FAKE_SERVICES_URL``."""
        jitter = jitter_ms / 1000
        memory = MemoryConsole(retry=PATIENT, transport=CrashingTransport(jitter))
        services = Services(os.environ["FAKE_SERVICES_URL"], CrashingTransport(jitter))
        return cls(memory, services, Journal(journal))


# --- one obligation: the unit of exactly-once work ------------------------------------------


class StepBlocked(Exception):
    """The step's obligation was failed or cancelled: it can never be done."""


@dataclass
class Performed:
    obligation: str
    result: Any
    outcome: str  # committed (by us) | already_committed (found done) | lost_race (Conflict)


def perform(
    agent: Agent,
    *,
    task_id: str,
    key: str,
    kind: str,
    payload: JSON,
    act: Callable[[], Any],
    depends_on: list[str] | None = None,
    run_id: str | None = None,
    name: str = "agent",
    step: int | None = None,
) -> Performed:
    """Do ``act`` (the side effect) at most once in effect for ``key``, and record its result.

    ``act`` must pass ``key`` on to the outside world as its idempotency key: if this process
    dies after the effect but before the commit, the next attempt repeats the call and the
    outside world answers with the first result instead of acting twice. ``name`` tells
    agents sharing a credential apart (their commits must not share an idempotency key).
    """
    agent.journal.note("open", key=key, step=step)
    obligation = agent.memory.obligations.open(
        task_id=task_id, kind=kind, key=key, depends_on=depends_on or [], payload=payload
    )
    if obligation["state"] == "committed":
        agent.journal.note("found_committed", key=key, step=step)
        return Performed(obligation["id"], obligation["result"], "already_committed")
    if obligation["state"] != "pending":
        raise StepBlocked(f"{key} is {obligation['state']}: {obligation['end_reason']}")
    agent.journal.note("act", key=key, step=step)
    result = act()
    try:
        committed = agent.memory.obligations.commit(
            obligation["id"], result=result, idempotency_key=f"{key}:commit:{name}"
        )
        performed = Performed(obligation["id"], committed["result"], "committed")
    except Conflict as refused:
        winner = refused.body if isinstance(refused.body, dict) else {}
        if winner.get("state") != "committed":
            raise  # a dependency not committed yet, say: not ours to paper over
        # Someone (another agent, or this one before a crash) committed first: theirs stands.
        performed = Performed(obligation["id"], winner["result"], "lost_race")
    agent.journal.note("committed", key=key, step=step, outcome=performed.outcome)
    if run_id:
        # Deterministic content: a resumed run re-sends it under the same idempotency key.
        episode(agent, run_id, f"{key}:result", f"{kind}: {json.dumps(performed.result)}")
    return performed


def episode(agent: Agent, run_id: str, key: str, content: str, role: str = "tool") -> None:
    """A trace of the run (discarded when it closes). Keyed, so a resumed run does not
    append the same trace twice."""
    with contextlib.suppress(Conflict):  # the run closed meanwhile: traces no longer matter
        agent.memory.episodes.add(run_id, role=role, content=content, idempotency_key=key)


def side_effect(agent: Agent, target: str, body: JSON, key: str) -> Callable[[], Any]:
    def act() -> Any:
        return {"id": agent.services.call(target, body, key)["id"]}

    return act


# --- the multi-step task ------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    name: str
    kind: str
    target: str  # "<service>/<operation>" of the fake services, or "memory" for a record write
    body: Callable[[JSON, JSON], JSON]  # (order, results so far) -> request body


def _record_body(order: JSON, results: JSON) -> JSON:
    return {
        "key": "order.status",
        "subject": f"order:{order['id']}",
        "value": {
            "status": "shipped",
            "charge": results["charge"]["id"],
            "shipment": results["ship"]["id"],
        },
        "source": {"kind": "tool_call", "ref": f"order:{order['id']}:fulfilment"},
        "owner": order["owner"],
        "reason": "order fulfilment outcome, for support and refunds",
        "scope": {"domain": "commerce", "task_type": "order_fulfilment"},
        "sensitivity": "internal",
        "retention": {"basis": "contract", "ttl": "P30D"},
    }


STEPS = [
    Step("reserve", "reserve", "inventory/reserve", lambda o, r: {"items": o["items"]}),
    Step(
        "charge",
        "charge",
        "payments/charge",
        lambda o, r: {"amount_cents": o["amount_cents"], "reservation": r["reserve"]["id"]},
    ),
    Step(
        "receipt",
        "email",
        "email/send",
        lambda o, r: {"to": o["email"], "template": "receipt", "charge": r["charge"]["id"]},
    ),
    Step(
        "ship",
        "ship",
        "shipping/create",
        lambda o, r: {"items": o["items"], "charge": r["charge"]["id"]},
    ),
    Step("record", "record_fact", "memory", _record_body),
]


def step_key(task_id: str, index: int) -> str:
    """The obligation key of step ``index`` (0-based) of a task: task and step identity."""
    return f"{task_id}:{index + 1}:{STEPS[index].name}"


def default_order(task_id: str) -> JSON:
    return {
        "id": task_id,
        "owner": "service:checkout",
        "email": "customer@example.com",
        "amount_cents": 4200,
        "items": ["sku-1", "sku-2"],
    }


def open_run(agent: Agent, task_id: str, owner: str) -> JSON:
    """The task's run: found by task id after a restart, else opened (keyed, so a crash
    between the open and its answer does not open a second one)."""
    for run in agent.memory.runs.list(task_id=task_id):
        return dict(run)  # the newest
    return dict(
        agent.memory.runs.open(task_id=task_id, owner=owner, idempotency_key=f"run:{task_id}")
    )


def run_task(agent: Agent, order: JSON) -> JSON:
    """Fulfil ``order``, resuming after the last checkpoint. Returns the final state."""
    task_id = order["id"]
    run = open_run(agent, task_id, order["owner"])
    latest = agent.memory.checkpoints.latest(run["id"])
    if latest is not None:
        step, state = latest["step"], latest["state"]
    else:
        step, state = 0, {"results": {}, "obligations": {}}
    agent.journal.note("start", task=task_id, run=run["id"], resumed_from=step)
    if run["state"] == "closed":
        return {"run": run["id"], "run_state": "closed", "step": step, "state": state}
    for index in range(step, len(STEPS)):
        current = STEPS[index]
        key = step_key(task_id, index)
        body = current.body(order, state["results"])
        previous = state["obligations"].get(STEPS[index - 1].name) if index else None
        if current.target == "memory":
            body = {**body, "observed_at": run["opened_at"]}
            body["source"] = {**body["source"], "run_id": run["id"]}
            act = _record_write(agent, body, key)
        else:
            act = side_effect(agent, current.target, body, key)
        performed = perform(
            agent,
            task_id=task_id,
            key=key,
            kind=current.kind,
            payload=body,
            act=act,
            depends_on=[previous] if previous else [],
            run_id=run["id"],
            step=index + 1,
        )
        state = {
            "results": {**state["results"], current.name: performed.result},
            "obligations": {**state["obligations"], current.name: performed.obligation},
        }
        agent.memory.checkpoints.save(run["id"], step=index + 1, state=state)
        agent.journal.note("checkpoint", step=index + 1)
    closed = agent.memory.runs.close(run["id"], idempotency_key=f"close:{task_id}")
    agent.journal.note("done", task=task_id)
    return {"run": run["id"], "run_state": closed["state"], "step": len(STEPS), "state": state}


def _record_write(agent: Agent, body: JSON, key: str) -> Callable[[], Any]:
    def act() -> Any:
        record = agent.memory.records.write(**body, idempotency_key=key)
        return {"id": record["id"], "version": record["version"]}

    return act


# --- two agents, one obligation --------------------------------------------------------------


def race(agent: Agent, *, task_id: str, key: str, worker: str, start_at: float = 0.0) -> JSON:
    """Try to charge once for ``key`` while other agents try the same. Exactly one commit
    wins; the others get its result (and see which worker won). ``start_at`` (epoch seconds)
    holds every racer after it has seen the obligation pending, so they really race."""
    body = {"amount_cents": 4200, "order": task_id}
    charge = side_effect(agent, "payments/charge", body, key)

    def act() -> Any:
        time.sleep(max(0.0, start_at - time.time()))
        return {**charge(), "worker": worker}

    performed = perform(
        agent, task_id=task_id, key=key, kind="charge", payload=body, act=act, name=worker
    )
    return {"worker": worker, "outcome": performed.outcome, "result": performed.result}


# --- acting on a fact: check it is still current first ----------------------------------------


def act_on_fact(agent: Agent, *, task_id: str, fact: JSON) -> JSON:
    """Ship with the carrier of the shipping preference ``fact`` (``{id, version, value}``,
    as held in the agent's context), after checking it is still the current version and
    safe to act on: shipping cannot be undone, so the value must be confirmed and in no open
    conflict (``facts.check`` with ``trust="confirmed"``). If a newer version replaced it, the
    newer one is checked the same way; otherwise the step is blocked, never done on a value
    no one has confirmed."""
    [check] = agent.memory.facts.check(
        [{"id": fact["id"], "version": fact["version"]}], trust="confirmed"
    )
    used, value = fact, fact.get("value")
    if not check["current"]:
        current_id = check.get("current_id")
        if not current_id:
            raise StepBlocked(f"fact {fact['id']} is {check.get('reason')}, with no current one")
        [check_current] = agent.memory.facts.check([{"id": current_id}], trust="confirmed")
        _require_safe(check_current)
        record = agent.memory.records.get(current_id)
        used, value = {"id": record["id"], "version": record["version"]}, record["value"]
    else:
        _require_safe(check)
    body = {"carrier": value, "fact": used["id"], "version": used["version"]}
    key = f"{task_id}:ship"
    performed = perform(
        agent,
        task_id=task_id,
        key=key,
        kind="ship",
        payload=body,
        act=side_effect(agent, "shipping/create", body, key),
    )
    return {
        "stale": not check["current"],
        "reason": check.get("reason"),
        "used": {"id": used["id"], "version": used["version"], "value": value},
        "result": performed.result,
    }


def _require_safe(check: Any) -> None:
    """Refuse an irreversible step on a value the memory does not vouch for (provisional, in
    open conflict, stale): the agent waits for a reviewer rather than guess."""
    if not check["safe_to_act"]:
        reasons = ", ".join(check["unsafe_reasons"])
        raise StepBlocked(f"fact {check['id']} is not safe to act on: {reasons}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jitter-ms", type=float, default=0.0, help="random pause per request")
    parser.add_argument("--journal", help="append what this process does here, as JSON lines")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="fulfil an order (resumes after a crash)")
    run.add_argument("--task-id", required=True)
    run.add_argument("--order", help="the order as JSON (default: a sample order)")
    racing = commands.add_parser("race", help="race other agents to commit one obligation")
    racing.add_argument("--task-id", required=True)
    racing.add_argument("--key", required=True)
    racing.add_argument("--worker", required=True)
    racing.add_argument("--start-at", type=float, default=0.0, help="epoch seconds to start at")
    stale = commands.add_parser("stale", help="act on a fact, checking it is current first")
    stale.add_argument("--task-id", required=True)
    stale.add_argument("--fact", required=True, help='{"id": ..., "version": ..., "value": ...}')
    args = parser.parse_args(argv)

    agent = Agent.from_env(args.jitter_ms, args.journal)
    with agent.memory:
        if args.command == "run":
            order = json.loads(args.order) if args.order else default_order(args.task_id)
            order["id"] = args.task_id
            output = run_task(agent, order)
        elif args.command == "race":
            output = race(
                agent,
                task_id=args.task_id,
                key=args.key,
                worker=args.worker,
                start_at=args.start_at,
            )
        else:
            output = act_on_fact(agent, task_id=args.task_id, fact=json.loads(args.fact))
    print(json.dumps(output, sort_keys=True), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
