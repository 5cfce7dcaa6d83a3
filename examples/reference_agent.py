"""A reference agent that uses Memory Console's state layer through the REST API only.

    export MEMORYCONSOLE_URL=http://127.0.0.1:8000 MEMORYCONSOLE_TOKEN=mc_...
    export FAKE_SERVICES_URL=http://127.0.0.1:8765      # python examples/fake_services.py
    python examples/reference_agent.py run --task-id order-1001
    python examples/reference_agent.py race --task-id order-1002 --key order-1002:charge --worker 3
    python examples/reference_agent.py stale --task-id order-1003 --fact '{"id": ..., "version": 1}'

No Django, no project imports: the standard library and HTTP. It fulfils an order in steps with
external side effects (reserve stock, charge, email a receipt, ship, then record a fact) and
survives ``kill -9`` at any point: run it again and it finishes the task with the same outcome
and the same side effects as a run that was never interrupted. How:

* **the run** is opened with ``Idempotency-Key: run:<task>`` and found again by task id;
* **each step is an obligation** whose key is ``<task>:<step number>:<step name>``. Before
  acting, the agent creates it (the same key returns the existing one): if it is already
  committed, its result is reused and nothing is done again;
* **the side effect carries the obligation key** as its idempotency key, so a crash between
  the effect and the commit (the one window no ledger can close) is retried without a second
  effect;
* **the commit is exactly once**: a ``409`` carries the winner's result, which the agent uses;
* **a checkpoint** after each step holds the results so far; a restart resumes after it.

``stale`` shows the other half of principle 8: before acting on a fact from its context the
agent asks ``/facts/check`` whether it is still current, and acts on the current version if not.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

JSON = dict[str, Any]
RETRYABLE_STATUS = {502, 503, 504}


class CrashPoint:
    """Crash testing: with ``REFERENCE_AGENT_DIE_AT=K`` the agent SIGKILLs itself at the K-th
    point of its HTTP traffic (counting from 0; point 2i is just before sending request i,
    2i+1 just after receiving its response, before acting on it)."""

    def __init__(self) -> None:
        raw = os.environ.get("REFERENCE_AGENT_DIE_AT", "")
        self.target = int(raw) if raw else None
        self.count = 0

    def tick(self) -> None:
        if self.target is not None and self.count == self.target:
            os.kill(os.getpid(), signal.SIGKILL)
        self.count += 1


CRASH = CrashPoint()


class ApiError(Exception):
    def __init__(self, method: str, path: str, status: int, body: Any) -> None:
        super().__init__(f"{method} {path} -> {status}: {json.dumps(body)[:500]}")
        self.status = status
        self.body = body


class Http:
    """JSON over HTTP with retries. Every POST this agent sends is safe to retry (it carries an
    idempotency key, or is idempotent by design), so lost connections are simply retried."""

    def __init__(self, base_url: str, headers: dict[str, str] | None = None) -> None:
        parts = urlsplit(base_url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self.prefix = parts.path.rstrip("/")
        self.headers = headers or {}
        self.jitter = 0.0

    def request(
        self, method: str, path: str, body: Any = None, *, key: str | None = None
    ) -> tuple[int, Any]:
        headers = {"Accept": "application/json", **self.headers}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if key is not None:
            headers["Idempotency-Key"] = key
        delay = 0.02
        for _ in range(60):
            if self.jitter:
                time.sleep(random.uniform(0, self.jitter))  # noqa: S311 - not crypto
            CRASH.tick()
            try:
                connection = http.client.HTTPConnection(self.host, self.port, timeout=30)
                try:
                    connection.request(method, self.prefix + path, body=data, headers=headers)
                    response = connection.getresponse()
                    raw = response.read()
                    status = response.status
                finally:
                    connection.close()
            except (OSError, http.client.HTTPException):
                time.sleep(delay)
                delay = min(delay * 2, 1.0)
                continue
            CRASH.tick()
            parsed = json.loads(raw) if raw else None
            in_flight = (
                status == 409
                and isinstance(parsed, dict)
                and str(parsed.get("type", "")).endswith("/idempotency-in-flight")
            )
            if status in RETRYABLE_STATUS or in_flight:
                # A request of ours (perhaps from before a crash) still holds this key.
                time.sleep(delay)
                delay = min(delay * 2, 1.0)
                continue
            return status, parsed
        raise ApiError(method, path, 0, "gave up retrying")

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        key: str | None = None,
        ok: tuple[int, ...] = (200, 201),
    ) -> Any:
        status, parsed = self.request(method, path, body, key=key)
        if status not in ok:
            raise ApiError(method, path, status, parsed)
        return parsed


@dataclass
class Agent:
    """The agent's two connections: Memory Console (``api``) and the outside world
    (``services``, where side effects happen)."""

    api: Http
    services: Http

    @classmethod
    def from_env(cls, jitter_ms: float = 0.0) -> Agent:
        token = os.environ["MEMORYCONSOLE_TOKEN"]
        api = Http(os.environ["MEMORYCONSOLE_URL"], {"Authorization": f"Bearer {token}"})
        services = Http(os.environ["FAKE_SERVICES_URL"])
        api.jitter = services.jitter = jitter_ms / 1000
        return cls(api, services)


# --- one obligation: the unit of exactly-once work ------------------------------------------------


@dataclass
class Performed:
    obligation: str
    result: Any
    outcome: str  # committed (by us) | already_committed (found done) | lost_race (409)


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
) -> Performed:
    """Do ``act`` (the side effect) at most once in effect for ``key``, and record its result.

    ``act`` must pass ``key`` on to the outside world as its idempotency key: if this process
    dies after the effect but before the commit, the next attempt repeats the call and the
    outside world answers with the first result instead of acting twice. ``name`` tells
    agents sharing a credential apart (their commits must not share an idempotency key).
    """
    obligation = agent.api.call(
        "POST",
        "/api/v1/obligations",
        {
            "task_id": task_id,
            "kind": kind,
            "key": key,
            "depends_on": depends_on or [],
            "payload": payload,
        },
    )
    if obligation["state"] == "committed":
        return Performed(obligation["id"], obligation["result"], "already_committed")
    if obligation["state"] != "pending":
        raise ApiError("POST", "/api/v1/obligations", 409, obligation)
    result = act()
    status, body = agent.api.request(
        "POST",
        f"/api/v1/obligations/{obligation['id']}/commit",
        {"result": result},
        key=f"{key}:commit:{name}",
    )
    if status == 200:
        performed = Performed(obligation["id"], body["result"], "committed")
    elif status == 409 and body.get("state") == "committed":
        # Someone (another agent, or this one before a crash) committed first: theirs stands.
        performed = Performed(obligation["id"], body["result"], "lost_race")
    else:
        raise ApiError("POST", "commit", status, body)
    if run_id:
        # Deterministic content: a resumed run re-sends it under the same idempotency key.
        episode(agent, run_id, f"{key}:result", f"{kind}: {json.dumps(performed.result)}")
    return performed


def episode(agent: Agent, run_id: str, key: str, content: str, role: str = "tool") -> None:
    """A trace of the run (discarded when it closes). Keyed, so a resumed run does not
    append the same trace twice."""
    status, body = agent.api.request(
        "POST", f"/api/v1/runs/{run_id}/episodes", {"role": role, "content": content}, key=key
    )
    if status not in (201, 409):  # 409: the run closed meanwhile; traces no longer matter
        raise ApiError("POST", "episodes", status, body)


def side_effect(agent: Agent, path: str, body: JSON, key: str) -> Callable[[], Any]:
    def act() -> Any:
        response = agent.services.call("POST", f"/{path}", body, key=key, ok=(200,))
        return {"id": response["id"]}

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
    between the open and its response does not open a second one)."""
    listing = agent.api.call("GET", f"/api/v1/runs?task_id={_quote(task_id)}")
    if listing["results"]:
        run: JSON = listing["results"][0]
        return run
    created: JSON = agent.api.call(
        "POST", "/api/v1/runs", {"task_id": task_id, "owner": owner}, key=f"run:{task_id}"
    )
    return created


def run_task(agent: Agent, order: JSON) -> JSON:
    """Fulfil ``order``, resuming from the last checkpoint. Returns the final state."""
    task_id = order["id"]
    run = open_run(agent, task_id, order["owner"])
    status, latest = agent.api.request("GET", f"/api/v1/runs/{run['id']}/checkpoints/latest")
    if status == 200:
        step, state = latest["step"], latest["state"]
    elif status == 404:
        step, state = 0, {"results": {}, "obligations": {}}
    else:
        raise ApiError("GET", "checkpoints/latest", status, latest)
    if run["state"] == "closed":
        return {"run": run["id"], "run_state": "closed", "step": step, "state": state}
    for index in range(step, len(STEPS)):
        current = STEPS[index]
        key = f"{task_id}:{index + 1}:{current.name}"
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
        )
        state = {
            "results": {**state["results"], current.name: performed.result},
            "obligations": {**state["obligations"], current.name: performed.obligation},
        }
        agent.api.call(
            "POST", f"/api/v1/runs/{run['id']}/checkpoints", {"step": index + 1, "state": state}
        )
    closed = agent.api.call("POST", f"/api/v1/runs/{run['id']}/close", key=f"close:{task_id}")
    return {"run": run["id"], "run_state": closed["state"], "step": len(STEPS), "state": state}


def _record_write(agent: Agent, body: JSON, key: str) -> Callable[[], Any]:
    def act() -> Any:
        record = agent.api.call("POST", "/api/v1/records", body, key=key)
        return {"id": record["id"], "version": record["version"]}

    return act


def _quote(value: str) -> str:
    return quote(value, safe="")


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
    as held in the agent's context), after checking it is still the current version."""
    check = agent.api.call(
        "POST", "/api/v1/facts/check", {"facts": [{"id": fact["id"], "version": fact["version"]}]}
    )["facts"][0]
    used, value = fact, fact.get("value")
    if not check["current"]:
        if not check.get("current_id"):
            raise ApiError("POST", "facts/check", 409, {"detail": "no current version", **check})
        record = agent.api.call("GET", f"/api/v1/records/{check['current_id']}")
        used, value = {"id": record["id"], "version": record["version"]}, record["value"]
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
        "used": {"id": used["id"], "version": used["version"], "value": value},
        "result": performed.result,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jitter-ms", type=float, default=0.0, help="random pause per request")
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

    agent = Agent.from_env(args.jitter_ms)
    if args.command == "run":
        order = json.loads(args.order) if args.order else default_order(args.task_id)
        order["id"] = args.task_id
        output = run_task(agent, order)
    elif args.command == "race":
        output = race(
            agent, task_id=args.task_id, key=args.key, worker=args.worker, start_at=args.start_at
        )
    else:
        output = act_on_fact(agent, task_id=args.task_id, fact=json.loads(args.fact))
    print(json.dumps(output, sort_keys=True), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
