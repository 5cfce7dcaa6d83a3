"""Retrieval cost after the semantic default: write and search p50 beside the previous default.

    .venv/bin/python benchmarks/retrieval_cost.py [--old /work/wt-old] [--rounds 3]
        [--writes 100] [--searches 100] [--concurrent 40] [--embeds 40] [--preload 300]

New tenants now embed with ``e5-small`` inside the write's transaction (the previous default,
``hashing-256``, was embedded later by a worker through the outbox), and the search's text leg
became a BM25 ranking over prefix terms computed in SQL. This measures, in one run, what that
costs through the HTTP API, beside the previous commit's default:

* ``old``: the previous checkout (``--old``, a worktree of the commit before), its default
  model (hashing-256, queued: the write does not embed);
* ``new e5``: this checkout, its default model (e5-small, embedded at write), OpenMP threads
  left to the engine (every core);
* ``new e5 omp1``: the same with ``OMP_NUM_THREADS=1``;
* ``new hashing``: this checkout with a ``hashing-256`` tenant: the new SQL (search document,
  BM25 text leg) without the model.

Each configuration is a child process with its checkout first on ``PYTHONPATH``, its own
freshly migrated database (``bench_cost_<config>``, on the one embedded server) and gunicorn
with 2 workers (``memoryconsole up``'s default) on loopback. A child creates a tenant with an
agent credential, preloads ``--preload`` memories through the API (realistic one- or
two-sentence English contents, distinct subjects and keys), then waits for the parent's
commands. The parent interleaves every phase across the configurations, the order rotated
each round, so that the machine's drift (other benchmarks, a test suite) hits all alike:

* ``write``: ``--writes`` API writes, one request per write, one client;
* ``search``: ``--searches`` text searches (``{"query", "top_k": 10}``), one client; queued
  embeddings are drained first (untimed), so queued tenants are searched with their vectors;
* ``write x2`` / ``search x2``: the same with 2 concurrent clients (``--concurrent`` requests
  each), one per gunicorn worker: where OpenMP's threads of two workers meet on the cores;
* ``embed``: e5 configurations only, ``get_embedder("e5-small").embed([text])`` and
  ``.embed_queries([text])`` of one text, in the child's process (``--embeds`` each).

Prints p50/p95 per configuration and phase over all rounds, the ratio of each p50 to the old
checkout's (with the per-round ratios' range), and the load average at start and end. Targets:
write p50 <= 1.3x and search p50 <= 1.5x the old default's.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

MAIN = Path(__file__).resolve().parent.parent
PROTOCOL = "@@ "  # prefix of the child's answers on its stdout; anything else is ignored
TARGET_WRITE = 1.3
TARGET_SEARCH = 1.5
WORKERS = 2  # gunicorn workers, as ``memoryconsole up`` starts by default
TOP_K = 10


@dataclass(frozen=True)
class Config:
    name: str
    checkout: str  # "new" or "old"
    model: str | None  # None: the checkout's default for a new tenant
    omp_threads: int | None  # None: OMP_NUM_THREADS unset


CONFIGS = [
    Config("old", "old", None, None),
    Config("new e5", "new", None, None),
    Config("new e5 omp1", "new", None, 1),
    Config("new hashing", "new", "hashing-256", None),
]
PHASES = ["write", "search", "write x2", "search x2", "embed"]


# --- realistic memories and questions ------------------------------------------------------------

PEOPLE = [
    "Priya", "Marco", "Aiko", "Tomasz", "Fatima", "Lucas", "Ingrid", "Kwame", "Sofia", "Daniel",
    "Mei", "Olu", "Hannah", "Rafael", "Anya", "Jonas", "Leila", "Carlos", "Yuki", "Grace",
    "Noah", "Amara", "Ethan", "Zara", "Pavel", "Elena", "Samir", "Chloe", "Ivan", "Nadia",
]  # fmt: skip

# (key, content template, question template): a slot per template, filled from its options.
FACTS: list[tuple[str, str, str, list[str]]] = [
    (
        "travel.seat",
        "{p} prefers {x} on flights longer than three hours and asks for it at check-in.",
        "which seat does {p} want on long flights",
        ["an aisle seat", "a window seat", "an exit row seat", "a seat near the front"],
    ),
    (
        "travel.meal",
        "{p} orders {x} when flying and has complained twice when it was missing.",
        "what meal does {p} order on a plane",
        ["the vegetarian meal", "the gluten-free meal", "the halal meal", "the vegan meal"],
    ),
    (
        "work.standup",
        "{p} runs the team standup at {x} and dislikes it being moved.",
        "when is the standup that {p} runs",
        ["nine in the morning", "half past ten", "noon on Mondays", "four in the afternoon"],
    ),
    (
        "work.report_deadline",
        "The quarterly report {p} owns is due {x}; finance needs a draft a week earlier.",
        "quarterly report deadline for {p}",
        ["on the fifth of each quarter", "at the end of the month", "every second Friday"],
    ),
    (
        "home.allergy",
        "{p} is allergic to {x}, so recipes and restaurant suggestions must avoid it.",
        "what is {p} allergic to",
        ["peanuts", "shellfish", "penicillin", "cat dander", "sesame"],
    ),
    (
        "comms.channel",
        "{p} wants urgent alerts by {x} and everything else in a daily digest email.",
        "how should urgent alerts reach {p}",
        ["text message", "a phone call", "a Slack direct message", "push notification"],
    ),
    (
        "shopping.carrier",
        "{p} asked that parcels go with {x} because the previous courier lost a delivery.",
        "which shipping carrier does {p} prefer",
        ["DHL Express", "the national post", "UPS ground", "a local bike courier"],
    ),
    (
        "fitness.routine",
        "{p} trains {x} before work and wants reminders the evening before.",
        "what is {p}'s workout routine",
        ["three times a week at the gym", "with a morning run", "at a pool", "on a rowing machine"],
    ),
    (
        "language.preference",
        "{p} reads documentation in {x} and prefers summaries written in that language.",
        "which language does {p} prefer for summaries",
        ["Portuguese", "German", "Japanese", "Spanish", "French"],
    ),
    (
        "project.stack",
        "{p}'s billing service runs on {x}; upgrades need a maintenance window on Sunday.",
        "what technology does {p}'s billing service use",
        ["PostgreSQL and Django", "Kotlin with Spring", "Go and Redis", "a Rails monolith"],
    ),
    (
        "finance.budget",
        "{p} approved a travel budget of {x} for the spring conference season.",
        "how much travel budget did {p} approve",
        ["four thousand euros", "two thousand dollars", "fifteen hundred pounds"],
    ),
    (
        "support.ticket",
        "{p} reported that {x} since the last release; the ticket is still open.",
        "what problem did {p} report after the release",
        ["exports time out", "the login page loops", "invoices show the wrong currency",
         "search returns stale results"],
    ),
]  # fmt: skip


# A second sentence for the memories past the first PEOPLE x FACTS, so contents stay distinct.
CODAS = [
    "",
    " It was confirmed again last week.",
    " This came up during onboarding.",
    " The assistant should not ask about it again.",
]


def memory(n: int) -> tuple[dict[str, Any], str]:
    """The ``n``th write body (its own subject and key) and a question that seeks it."""
    person = PEOPLE[n % len(PEOPLE)]
    key, content, question, options = FACTS[(n // len(PEOPLE)) % len(FACTS)]
    option = options[n % len(options)]
    coda = CODAS[(n // (len(PEOPLE) * len(FACTS))) % len(CODAS)]
    observed = datetime.now(UTC) - timedelta(hours=1 + n % 500)
    body = {
        "key": f"{key}.n{n}",
        "subject": f"user:{person.lower()}-{n}",
        "value": option,
        "content": content.format(p=person, x=option) + coda,
        "source": {"kind": "interaction", "ref": f"chat:{n}", "turn_id": "t1"},
        "observed_at": observed.isoformat().replace("+00:00", "Z"),
        "owner": "service:assistant",
        "reason": "stated by the user in conversation",
        "scope": {"domain": "assistant"},
        "sensitivity": "internal",
        "retention": {"basis": "indefinite"},
    }
    return body, question.format(p=person)


# --- the child: one configuration's checkout, database, gunicorn and tenant ---------------------


def answer(data: dict[str, Any]) -> None:
    print(PROTOCOL + json.dumps(data), flush=True)


def log(label: str, message: str) -> None:
    print(f"  .. [{label}] {message}", file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Api:
    """An agent credential's HTTP calls to gunicorn on loopback, one connection a request."""

    def __init__(self, port: int, token: str) -> None:
        self.port = port
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def post(self, path: str, body: dict[str, Any], expected: int) -> float:
        started = time.perf_counter()
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        conn.request("POST", path, json.dumps(body), self.headers)
        response = conn.getresponse()
        content = response.read()
        conn.close()
        elapsed = time.perf_counter() - started
        if response.status != expected:
            raise RuntimeError(f"POST {path}: {response.status} {content[:400]!r}")
        return elapsed


def in_threads(clients: int, per_client: int, call: Callable[[int], float]) -> list[float]:
    """``clients`` threads, each making ``per_client`` calls ``call(i)`` (distinct ``i``)."""
    results: list[list[float]] = [[] for _ in range(clients)]
    errors: list[BaseException] = []

    def run(c: int) -> None:
        try:
            for j in range(per_client):
                results[c].append(call(c * per_client + j))
        except BaseException as exc:  # re-raised in the caller's thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(c,)) for c in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return [s for r in results for s in r]


def child(args: argparse.Namespace) -> None:
    from benchmarks.harness import ROOT, bench_database, setup_django, wait_healthy

    label = args.child
    slug = "cost-" + label.replace(" ", "-")
    import apps

    with bench_database(slug.replace("-", "_")):
        setup_django()
        from django.conf import settings

        from apps.core.actors import Actor
        from apps.derivations.embeddings import embeddings_drain
        from apps.tenancy.context import tenant_scope
        from apps.tenancy.services import credential_issue, tenant_create

        settings.OUTBOX_RELAY_ON_COMMIT = False  # no broker: the child drains the outbox itself
        actor = Actor.system("benchmark")
        tenant = tenant_create(slug=slug, name=f"Retrieval cost ({label})", actor=actor)
        if args.model:
            tenant.embedding_model = args.model
            tenant.save(update_fields=["embedding_model"])
        with tenant_scope(tenant.pk):
            _credential, token = credential_issue(tenant=tenant, name="bench", actor=actor)

        def drain() -> int:
            drained = 0
            while True:
                outcome = embeddings_drain(tenant.pk, budget=120.0)
                drained += outcome.embedded
                if not outcome.claimed:
                    return drained

        port = free_port()
        env = {**os.environ, "ALLOWED_HOSTS": "127.0.0.1"}
        env.pop("CELERY_BROKER_URL", None)
        server = subprocess.Popen(
            [
                *(sys.executable, "-m", "gunicorn", "memoryconsole.wsgi"),
                *("-b", f"127.0.0.1:{port}", "-w", str(WORKERS)),
                *("--log-level", "warning", "--timeout", "300"),
            ],
            cwd=ROOT,
            env=env,
            stdout=sys.stderr,
            start_new_session=True,
        )
        try:
            wait_healthy(port, timeout=120)
            api = Api(port, token)
            counter = [0]  # the next memory's number
            asked = [0]  # searches made
            numbering = threading.Lock()

            def write(_i: int) -> float:
                with numbering:
                    n = counter[0]
                    counter[0] += 1
                return api.post("/api/v1/records", memory(n)[0], 201)

            def search(i: int) -> float:
                # Questions about memories already written, spread over the whole tenant.
                with numbering:
                    asked[0] += 1
                    n = (asked[0] * 7919) % counter[0]
                return api.post("/api/v1/search", {"query": memory(n)[1], "top_k": TOP_K}, 200)

            # Preload (both workers busy: also their warm-up: imports, model, caches).
            started = time.perf_counter()
            in_threads(WORKERS, args.preload // WORKERS, write)
            drained = drain()
            in_threads(WORKERS, 10, search)
            log(
                label,
                f"ready: {counter[0]} memories in {time.perf_counter() - started:.0f}s "
                f"({drained} drained), model {tenant.embedding_model}",
            )
            answer(
                {
                    "ready": True,
                    "apps": list(apps.__path__),
                    "model": tenant.embedding_model,
                    "omp": os.environ.get("OMP_NUM_THREADS"),
                }
            )
            for line in sys.stdin:
                command = line.strip()
                if command == "quit":
                    break
                started = time.perf_counter()
                seconds: dict[str, list[float]] = {}
                if command == "write":
                    seconds["write"] = in_threads(1, args.writes, write)
                elif command == "write x2":
                    seconds["write x2"] = in_threads(2, args.concurrent, write)
                elif command in ("search", "search x2"):
                    drain()
                    if command == "search":
                        seconds["search"] = in_threads(1, args.searches, search)
                    else:
                        seconds["search x2"] = in_threads(2, args.concurrent, search)
                elif command == "embed":
                    seconds = (
                        embed_alone(args.embeds) if tenant.embedding_model == "e5-small" else {}
                    )
                else:
                    raise SystemExit(f"unknown command {command!r}")
                log(
                    label,
                    f"{command}: {sum(len(s) for s in seconds.values())} calls in "
                    f"{time.perf_counter() - started:.1f}s, tenant {counter[0]} memories",
                )
                answer({"seconds": seconds, "memories": counter[0]})
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(20)


def embed_alone(count: int) -> dict[str, list[float]]:
    from apps.derivations.embedders import get_embedder

    embedder = get_embedder("e5-small")
    seconds: dict[str, list[float]] = {"embed passage": [], "embed query": []}
    for n in range(count):
        body, question = memory(n)
        started = time.perf_counter()
        embedder.embed([body["content"]])
        seconds["embed passage"].append(time.perf_counter() - started)
        started = time.perf_counter()
        embedder.embed_queries([question])
        seconds["embed query"].append(time.perf_counter() - started)
    return seconds


# --- the parent: children, interleaved rounds, the table ---------------------------------------


@dataclass
class Child:
    config: Config
    process: subprocess.Popen[str]
    seconds: dict[str, list[float]] = field(default_factory=dict)
    rounds: dict[str, list[float]] = field(default_factory=dict)  # p50 per round
    info: dict[str, Any] = field(default_factory=dict)

    def read(self) -> dict[str, Any]:
        stdout: IO[str] | None = self.process.stdout
        assert stdout is not None
        for line in stdout:
            if line.startswith(PROTOCOL):
                data: dict[str, Any] = json.loads(line[len(PROTOCOL) :])
                return data
        raise RuntimeError(f"{self.config.name}: the child ended (exit {self.process.wait()})")

    def command(self, command: str) -> dict[str, Any]:
        stdin = self.process.stdin
        assert stdin is not None
        stdin.write(command + "\n")
        stdin.flush()
        data = self.read()
        for phase, values in data["seconds"].items():
            self.seconds.setdefault(phase, []).extend(values)
            self.rounds.setdefault(phase, []).append(percentile(values, 50))
        return data


def spawn(config: Config, args: argparse.Namespace) -> Child:
    checkout = Path(args.old if config.checkout == "old" else MAIN).resolve()
    env = {
        **os.environ,
        "PYTHONPATH": f"{checkout}:{checkout / 'clients' / 'python'}",
        # Both checkouts on the one embedded server (this checkout's instance).
        "MEMORYCONSOLE_HOME": os.environ.get("MEMORYCONSOLE_HOME", str(MAIN / "var")),
    }
    env.pop("OMP_NUM_THREADS", None)
    if config.omp_threads is not None:
        env["OMP_NUM_THREADS"] = str(config.omp_threads)
    command = [sys.executable, str(Path(__file__).resolve()), "--child", config.name]
    command += ["--model", config.model or ""]
    for name in ("writes", "searches", "concurrent", "embeds", "preload"):
        command += [f"--{name}", str(getattr(args, name))]
    process = subprocess.Popen(
        command,
        env=env,
        cwd=checkout,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    return Child(config, process)


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:,.1f}"


def parent(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(MAIN))
    from benchmarks.harness import progress, table

    load_start = os.getloadavg()
    wall = time.perf_counter()
    progress(f"load average at start: {' '.join(f'{x:.2f}' for x in load_start)}")
    children = [spawn(config, args) for config in CONFIGS]
    try:
        for c in children:
            c.info = c.read()
            progress(f"{c.config.name}: ready, {c.info}")
            expected = str(Path(args.old if c.config.checkout == "old" else MAIN).resolve())
            if not all(path.startswith(expected) for path in c.info["apps"]):
                raise SystemExit(f"{c.config.name} imported apps from {c.info['apps']}")
        for r in range(args.rounds):
            order = children[r % len(children) :] + children[: r % len(children)]
            for phase in PHASES:
                for c in order:
                    progress(f"round {r + 1}/{args.rounds}: {phase} on {c.config.name}")
                    c.command(phase)
        for c in children:
            stdin = c.process.stdin
            assert stdin is not None
            stdin.write("quit\n")
            stdin.close()
            c.process.wait(60)
    finally:
        for c in children:
            if c.process.poll() is None:
                os.killpg(c.process.pid, signal.SIGTERM)
                c.process.wait(30)
    load_end = os.getloadavg()

    old = children[0]
    rows = []
    for phase in [*PHASES, "embed passage", "embed query"]:
        if phase == "embed":
            continue
        for c in children:
            values = c.seconds.get(phase)
            if not values:
                continue
            base = old.seconds.get(phase)
            if base:
                ratio = f"{percentile(values, 50) / percentile(base, 50):.2f}x"
                per_round = [a / b for a, b in zip(c.rounds[phase], old.rounds[phase], strict=True)]
                spread = f"{min(per_round):.2f}-{max(per_round):.2f}x"
            else:
                ratio = spread = ""
            rows.append(
                [
                    phase,
                    c.config.name,
                    c.info["model"],
                    c.info["omp"] or "unset",
                    len(values),
                    ms(percentile(values, 50)),
                    ms(percentile(values, 95)),
                    ratio,
                    spread,
                ]
            )
    headers = ["phase", "configuration", "model", "OMP", "calls", "p50 ms", "p95 ms"]
    headers += ["p50 vs old", "per round"]
    print(
        f"\nRetrieval cost through the HTTP API (gunicorn, {WORKERS} workers, loopback): "
        f"{args.rounds} interleaved rounds, tenants preloaded with {args.preload} memories\n"
    )
    print(table(headers, rows))
    print()
    new = next(c for c in children if c.config.name == "new e5")
    for phase, target in (("write", TARGET_WRITE), ("search", TARGET_SEARCH)):
        for c in children[1:3]:
            got = percentile(c.seconds[phase], 50) / percentile(old.seconds[phase], 50)
            verdict = "met" if got <= target else "MISSED"
            print(f"{phase} p50 {c.config.name} / old: {got:.2f}x (target <= {target}x): {verdict}")
    for phase in ("write", "search", "write x2", "search x2", "embed passage", "embed query"):
        one = percentile(children[2].seconds[phase], 50)
        every = percentile(new.seconds[phase], 50)
        print(f"{phase}: OMP_NUM_THREADS=1 p50 / unset p50 = {one / every:.2f}x")
    print(
        f"\nload average at start {' '.join(f'{x:.2f}' for x in load_start)}, at end "
        f"{' '.join(f'{x:.2f}' for x in load_end)}; {os.cpu_count()} cores; wall "
        f"{time.perf_counter() - wall:.0f}s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--old",
        required=True,
        help="a checkout of the commit to compare with (e.g. `git worktree add ../old df03d47`)",
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--writes", type=int, default=100, help="writes per round, 1 client")
    parser.add_argument("--searches", type=int, default=100, help="searches per round, 1 client")
    parser.add_argument("--concurrent", type=int, default=40, help="calls per client, 2 clients")
    parser.add_argument("--embeds", type=int, default=40, help="embeddings of one text per round")
    parser.add_argument("--preload", type=int, default=300, help="memories before round 1")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
    else:
        parent(args)


if __name__ == "__main__":
    main()
