"""One system of ``benchmarks/peers.py``, driven over JSON lines on stdin and stdout.

    PYTHON benchmarks/peers_driver.py SYSTEM --data DATA.npz   (its configuration on stdin)

``SYSTEM`` is ``memoryconsole`` (the product's HTTP API, run with the product's Python),
``langgraph-hnsw``, ``langgraph-flat`` (LangGraph's PostgresStore with and without its ANN
index) or ``mem0`` (mem0 OSS on pgvector), each run with the Python of its own venv, so that a
peer's packages never enter the product's environment. This file imports nothing beside the
standard library and numpy at module level; each driver imports its own library.

Every system gets the same vectors: record ``n`` is stored with the text ``r<n>`` and query
``i`` is asked as ``q<i>``, and a peer's embedder returns the precomputed vector of that text
(``DATA.npz``, written by ``peers.py``). The driver times each call of the system's own client
API (``time.perf_counter`` around the call, one call at a time) and answers with the seconds
and, for searches, the record numbers found, which ``peers.py`` scores against exact ranking.

The first line on stdin is the configuration (a JSON object: the peer's ``dsn``, or Memory
Console's ``port`` and ``tokens``, kept off the command line). Then commands, one JSON object a
line: ``{"op": "load", "stop": N}`` (records ``0..N-1``, by the
system's bulk path where it has one), ``{"op": "search", "queries": [i, ...]}``,
``{"op": "write", "records": [n, ...]}``, ``{"op": "delete", "records": [n, ...]}``,
``{"op": "floor", "records": [n, ...]}`` (Memory Console only: its request without work),
``{"op": "transport", "records": [n, ...]}`` (the same server's HTTP without Django),
``{"op": "framework", "records": [n, ...]}`` (the request refused before the database),
``{"op": "info"}``, until stdin ends. Answers are one JSON object a line; anything a library
prints goes to stderr, so it cannot break the protocol.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import numpy as np

TOP_K = 10
# Memory Console is asked for its lowest relevance floor (the peers have none); peers.py's exact
# ranking counts the records at or above it, so no system is scored on records under it.
MIN_SIMILARITY = 0.0
DOMAINS = ("billing", "support", "travel", "health", "legal", "ops", "commerce", "plan", "hr", "it")


def namespace(tenant: int) -> str:
    return f"t{tenant:02d}"


class Data:
    """The vectors and their tenants, domains and queries (``peers.py`` wrote them)."""

    def __init__(self, path: str) -> None:
        with np.load(path) as data:
            self.vectors = data["vectors"]
            self.tenant = data["tenant"]
            self.domain = data["domain"]
            self.queries = data["queries"]
            self.query_tenant = data["query_tenant"]
            self.query_filtered = data["query_filtered"]

    def vector_of(self, text: str) -> list[float]:
        """The precomputed vector of ``r<n>`` (a record) or ``q<i>`` (a query)."""
        kind, number = text[:1], int(text[1:])
        if kind == "r":
            return [float(x) for x in self.vectors[number]]
        if kind == "q":
            return [float(x) for x in self.queries[number]]
        raise ValueError(f"no precomputed vector for {text!r}")


def timed(call: Callable[[int], Any], argument: int) -> tuple[float, Any]:
    started = time.perf_counter()
    result = call(argument)
    return time.perf_counter() - started, result


# --- Memory Console: the agent API over HTTP ------------------------------------------------


class MemoryConsole:
    """POST /api/v1/records, POST /api/v1/search, DELETE /api/v1/records/{id}, with the
    tenant's agent credential."""

    def __init__(self, data: Data, config: dict[str, Any]) -> None:
        self.data = data
        self.port = int(config["port"])
        self.bare_port = int(config["bare_port"])
        self.tokens: list[str] = config["tokens"]
        self.ids: dict[int, str] = {}  # record number -> record id
        self.numbers: dict[str, int] = {}
        self.observed_at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    def call(
        self, method: str, path: str, tenant: int | None, body: Any, expected: int, port: int = 0
    ) -> Any:
        headers = {} if tenant is None else {"Authorization": f"Bearer {self.tokens[tenant]}"}
        payload = None
        if body is not None:
            payload = json.dumps(body)
            headers["Content-Type"] = "application/json"
        # A connection per request: gunicorn's sync workers close each one after answering.
        conn = http.client.HTTPConnection("127.0.0.1", port or self.port, timeout=120)
        try:
            conn.request(method, path, payload, headers)
            response = conn.getresponse()
            content = response.read()
        finally:
            conn.close()
        if response.status != expected:
            raise RuntimeError(f"{method} {path}: {response.status} {content[:300]!r}")
        return json.loads(content) if content else None

    def body(self, n: int) -> dict[str, Any]:
        # Every governance member a write carries (as benchmarks/records_write.py sends).
        return {
            "key": "doc.note",
            "subject": f"item:{n}",
            "value": {"n": n},
            "content": f"r{n}",
            "source": {"kind": "interaction", "ref": f"interaction:{n}", "turn_id": "t1"},
            "observed_at": self.observed_at,
            "owner": "service:bench",
            "reason": "peer benchmark",
            "scope": {"domain": DOMAINS[int(self.data.domain[n])]},
            "sensitivity": "internal",
            "retention": {"basis": "contract", "ttl": "P365D"},
            "vector": [round(float(x), 7) for x in self.data.vectors[n]],
        }

    def write(self, n: int) -> None:
        tenant = int(self.data.tenant[n])
        record = self.call("POST", "/api/v1/records", tenant, self.body(n), 201)
        self.ids[n] = record["id"]
        self.numbers[record["id"]] = n

    def load(self, stop: int) -> None:
        # Two clients, as many as the server's workers: the load is not what is measured.
        def run(part: int) -> None:
            for n in range(part, stop, 2):
                self.write(n)
                if n % 5000 == 0:
                    log(f"memoryconsole: loading, {n:,}/{stop:,}")

        threads = [threading.Thread(target=run, args=(p,)) for p in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if len(self.ids) != stop:
            raise RuntimeError(f"loaded {len(self.ids)} of {stop} records")

    def search(self, i: int) -> list[int]:
        body: dict[str, Any] = {
            "vector": [round(float(x), 7) for x in self.data.queries[i]],
            "top_k": TOP_K,
            "min_similarity": MIN_SIMILARITY,
        }
        if self.data.query_filtered[i]:
            body["scope"] = {"domain": DOMAINS[0]}
        found = self.call("POST", "/api/v1/search", int(self.data.query_tenant[i]), body, 200)
        # A summary hit (none here: no summaries are written) has no record.
        return [self.numbers.get((hit["record"] or {}).get("id"), -1) for hit in found["results"]]

    def delete(self, n: int) -> None:
        record_id = self.ids.pop(n)
        del self.numbers[record_id]
        self.call("DELETE", f"/api/v1/records/{record_id}", int(self.data.tenant[n]), None, 200)

    def floor(self, n: int) -> None:
        """The request's floor: an authenticated ``GET /api/v1/me`` (the credential's lookup,
        the tenant's context, the middleware, rendering), no memory work."""
        self.call("GET", "/api/v1/me", n % len(self.tokens), None, 200)

    def transport(self, n: int) -> None:
        """The same request to the same gunicorn settings around an application answering a
        constant body (``benchmarks/bare_http.py``): what HTTP itself costs."""
        self.call("GET", "/api/v1/me", n % len(self.tokens), None, 200, port=self.bare_port)

    def framework(self, n: int) -> None:
        """The same request without a credential, answered 401 by the product: its middleware,
        DRF's dispatch, the problem answer; no database statement."""
        self.call("GET", "/api/v1/me", None, None, 401)

    def info(self) -> dict[str, Any]:
        return {"client": "http.client"}


# --- LangGraph: PostgresStore with an index config ------------------------------------------


class LangGraph:
    """``PostgresStore`` with ``index={"dims": 384, "embed": <lookup>, "fields": ["text"]}``:
    items ``{"text": "r<n>", "domain": ...}`` under the namespace ``(t<tenant>,)``."""

    def __init__(self, data: Data, config: dict[str, Any], kind: str) -> None:
        from langgraph.store.postgres import PostgresStore

        self.data = data
        self.kind = kind
        index = {
            "dims": int(data.vectors.shape[1]),
            "embed": lambda texts: [data.vector_of(t) for t in texts],
            "fields": ["text"],
            "distance_type": "cosine",
            "ann_index_config": {"kind": kind},
        }
        self.context = PostgresStore.from_conn_string(config["dsn"], index=index)  # type: ignore[arg-type]
        self.store = self.context.__enter__()
        self.store.setup()

    def item(self, n: int) -> tuple[tuple[str], str, dict[str, Any]]:
        value = {"text": f"r{n}", "domain": DOMAINS[int(self.data.domain[n])]}
        return (namespace(int(self.data.tenant[n])),), str(n), value

    def write(self, n: int) -> None:
        self.store.put(*self.item(n))

    def load(self, stop: int) -> None:
        from langgraph.store.base import PutOp

        chunk = 500
        for start in range(0, stop, chunk):
            self.store.batch([PutOp(*self.item(n)) for n in range(start, min(stop, start + chunk))])
            if start % 5000 == 0:
                log(f"langgraph-{self.kind}: loading, {start:,}/{stop:,}")

    def search(self, i: int) -> list[int]:
        found = self.store.search(
            (namespace(int(self.data.query_tenant[i])),),
            query=f"q{i}",
            filter={"domain": DOMAINS[0]} if self.data.query_filtered[i] else None,
            limit=TOP_K,
        )
        return [int(item.key) for item in found]

    def delete(self, n: int) -> None:
        self.store.delete((namespace(int(self.data.tenant[n])),), str(n))

    def info(self) -> dict[str, Any]:
        from importlib.metadata import version

        return {
            "langgraph": version("langgraph"),
            "langgraph-checkpoint-postgres": version("langgraph-checkpoint-postgres"),
            "index": self.kind,
        }


# --- mem0 OSS: Memory on pgvector, a lookup embedder, add(infer=False) ------------------------


class Mem0:
    """``mem0.Memory`` with the pgvector store (its default HNSW index) and an embedder that
    returns the precomputed vector of a text. ``add(..., infer=False)`` stores a message as a
    memory without the LLM; the OpenAI LLM mem0 builds by default is never called (its client
    gets a placeholder key, and no request leaves the machine)."""

    def __init__(self, data: Data, config: dict[str, Any]) -> None:
        os.environ.setdefault("OPENAI_API_KEY", "unused-infer-false")
        from mem0 import Memory
        from mem0.embeddings.base import EmbeddingBase

        class Lookup(EmbeddingBase):  # type: ignore[misc]
            def embed(self, text: str, memory_action: str | None = None) -> list[float]:
                return data.vector_of(text)

        self.data = data
        self.memory = Memory.from_config(
            {
                "vector_store": {
                    "provider": "pgvector",
                    "config": {
                        "connection_string": config["dsn"],
                        "collection_name": "memories",
                        "embedding_model_dims": int(data.vectors.shape[1]),
                    },
                },
                "history_db_path": config["history"],
            }
        )
        self.memory.embedding_model = Lookup()
        self.ids: dict[int, str] = {}
        self.numbers: dict[str, int] = {}

    def write(self, n: int) -> None:
        added = self.memory.add(
            f"r{n}",
            user_id=namespace(int(self.data.tenant[n])),
            metadata={"domain": DOMAINS[int(self.data.domain[n])]},
            infer=False,
        )
        (result,) = added["results"]
        self.ids[n] = result["id"]
        self.numbers[result["id"]] = n

    def load(self, stop: int) -> None:
        # An add() of up to 200 messages of one (tenant, domain), each message one memory; two
        # clients, as for Memory Console (mem0 guards its history database with a lock and
        # takes PostgreSQL connections from a pool).
        groups: dict[tuple[int, int], list[int]] = {}
        for n in range(stop):
            groups.setdefault((int(self.data.tenant[n]), int(self.data.domain[n])), []).append(n)
        calls = [
            (tenant, domain, numbers[start : start + 200])
            for (tenant, domain), numbers in sorted(groups.items())
            for start in range(0, len(numbers), 200)
        ]
        lock = threading.Lock()

        def add(tenant: int, domain: int, numbers: list[int]) -> None:
            added = self.memory.add(
                [{"role": "user", "content": f"r{n}"} for n in numbers],
                user_id=namespace(tenant),
                metadata={"domain": DOMAINS[domain]},
                infer=False,
            )
            with lock:
                for n, result in zip(numbers, added["results"], strict=True):
                    self.ids[n] = result["id"]
                    self.numbers[result["id"]] = n
                if len(self.ids) // 5000 != (len(self.ids) - len(numbers)) // 5000:
                    log(f"mem0: loading, {len(self.ids):,}/{stop:,}")

        def run(part: int) -> None:
            for call in calls[1 + part :: 2]:
                add(*call)

        # mem0 creates its table on first use, unguarded: two first adds at once would both
        # create it, and one would fail. The first add alone, then two clients.
        add(*calls[0])
        threads = [threading.Thread(target=run, args=(p,)) for p in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if len(self.ids) != stop:
            raise RuntimeError(f"loaded {len(self.ids)} of {stop} memories")

    def search(self, i: int) -> list[int]:
        filters: dict[str, Any] = {"user_id": namespace(int(self.data.query_tenant[i]))}
        if self.data.query_filtered[i]:
            filters["domain"] = DOMAINS[0]
        found = self.memory.search(f"q{i}", top_k=TOP_K, filters=filters, threshold=0.0)
        return [self.numbers.get(hit["id"], -1) for hit in found["results"]]

    def delete(self, n: int) -> None:
        memory_id = self.ids.pop(n)
        del self.numbers[memory_id]
        self.memory.delete(memory_id)

    def info(self) -> dict[str, Any]:
        from importlib.metadata import version

        return {"mem0ai": version("mem0ai"), "index": "hnsw (mem0's pgvector default)"}


# --- the loop --------------------------------------------------------------------------------


def log(message: str) -> None:
    print(f"  .. {message}", file=sys.stderr, flush=True)


def build(system: str, data: Data, config: dict[str, Any]) -> Any:
    if system == "memoryconsole":
        return MemoryConsole(data, config)
    if system in ("langgraph-hnsw", "langgraph-flat"):
        return LangGraph(data, config, system.removeprefix("langgraph-"))
    if system == "mem0":
        return Mem0(data, config)
    raise SystemExit(f"unknown system {system!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("system")
    parser.add_argument("--data", required=True)
    args = parser.parse_args()
    # The protocol keeps the real stdout; whatever a library prints goes to stderr.
    protocol = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())

    def answer(data: dict[str, Any]) -> None:
        protocol.write(json.dumps(data) + "\n")
        protocol.flush()

    data = Data(args.data)
    driver = build(args.system, data, json.loads(sys.stdin.readline()))
    answer({"ready": True})
    for line in sys.stdin:
        command = json.loads(line)
        op = command["op"]
        if op == "info":
            answer(driver.info())
        elif op == "load":
            seconds, _ = timed(driver.load, int(command["stop"]))
            answer({"seconds": seconds})
        elif op == "search":
            times, hits = [], []
            for i in command["queries"]:
                spent, found = timed(driver.search, int(i))
                times.append(spent)
                hits.append(found)
            answer({"seconds": times, "hits": hits})
        elif op in ("write", "delete", "floor", "transport", "framework"):
            call = getattr(driver, op)
            answer({"seconds": [timed(call, int(n))[0] for n in command["records"]]})
        else:
            raise SystemExit(f"unknown op {op!r}")


if __name__ == "__main__":
    main()
