"""A local stand-in for services with external side effects (payments, email, shipping).

    python examples/fake_services.py --port 8765

``POST /<service>/<operation>`` with a JSON body and, optionally, an ``Idempotency-Key``
header performs a (pretend) side effect and answers ``{"id", "service", "operation",
"replayed", "request"}``. Like a real payment API, a key it has seen returns the first
response again (``replayed: true``) with no second effect, and the same key with a different
body is refused (``422``). A call without a key is always a new effect.

``GET /stats`` reports what happened: ``calls`` (every request), ``effects`` (side effects
actually performed), ``calls_by_key`` and ``effects_by_key``, and ``log`` (the performed
effects, in order). ``POST /reset`` forgets everything. Ids are derived from the key, so two
runs of the same task produce the same ids.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Ledger:
    """What the fake services did; thread-safe."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        self.calls = 0
        self.calls_by_key: dict[str, int] = {}
        self.responses: dict[str, tuple[str, dict[str, Any]]] = {}
        self.log: list[dict[str, Any]] = []

    def call(self, service: str, operation: str, key: str | None, body: Any) -> tuple[int, Any]:
        fingerprint = json.dumps([service, operation, body], sort_keys=True)
        with self.lock:
            self.calls += 1
            if key is not None:
                self.calls_by_key[key] = self.calls_by_key.get(key, 0) + 1
                if key in self.responses:
                    seen, response = self.responses[key]
                    if seen != fingerprint:
                        return 422, {"error": "Idempotency-Key reused with a different request"}
                    return 200, {**response, "replayed": True}
            number = len(self.log) + 1
            suffix = hashlib.sha256(key.encode()).hexdigest()[:12] if key else f"n{number}"
            response = {
                "id": f"{operation}_{suffix}",
                "service": service,
                "operation": operation,
                "replayed": False,
                "request": body,
            }
            self.log.append({"key": key, "service": service, "operation": operation, "body": body})
            if key is not None:
                self.responses[key] = (fingerprint, response)
            return 200, response

    def stats(self) -> dict[str, Any]:
        with self.lock:
            effects_by_key: dict[str, int] = {}
            for entry in self.log:
                if entry["key"] is not None:
                    effects_by_key[entry["key"]] = effects_by_key.get(entry["key"], 0) + 1
            return {
                "calls": self.calls,
                "effects": len(self.log),
                "calls_by_key": dict(self.calls_by_key),
                "effects_by_key": effects_by_key,
                "log": list(self.log),
            }


class FakeServicesServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], delay: float = 0.0) -> None:
        super().__init__(address, Handler)
        self.ledger = Ledger()
        self.delay = delay

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"


class Handler(BaseHTTPRequestHandler):
    server: FakeServicesServer

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the ledger is the log."""

    def _answer(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path == "/stats":
            self._answer(200, self.server.ledger.stats())
        else:
            self._answer(404, {"error": "not found"})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.path == "/reset":
            with self.server.ledger.lock:
                self.server.ledger.reset()
            self._answer(200, {"reset": True})
            return
        parts = [p for p in self.path.split("/") if p]
        if len(parts) != 2:
            self._answer(404, {"error": "POST /<service>/<operation>"})
            return
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._answer(400, {"error": "JSON body expected"})
            return
        if self.server.delay:
            time.sleep(self.server.delay)  # a slow downstream: widens the window for a kill
        status, response = self.server.ledger.call(
            parts[0], parts[1], self.headers.get("Idempotency-Key"), body
        )
        self._answer(status, response)


def serve_in_thread(
    host: str = "127.0.0.1", port: int = 0, delay: float = 0.0
) -> FakeServicesServer:
    """Start the fake services on a background thread; ``server.url`` is their address and
    ``server.shutdown()`` stops them."""
    server = FakeServicesServer((host, port), delay=delay)
    threading.Thread(target=server.serve_forever, name="fake-services", daemon=True).start()
    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds per side effect")
    args = parser.parse_args()
    server = FakeServicesServer((args.host, args.port), delay=args.delay)
    print(f"fake services on {server.url} (GET /stats)", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()


if __name__ == "__main__":
    main()
