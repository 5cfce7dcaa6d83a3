"""What the sync and async clients share: the description of each call, the retry policy and
the reading of answers. The two clients differ only in how they wait."""

from __future__ import annotations

import json
import os
import random
import uuid
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import quote

import httpx

from .errors import ApiError, TransportError, error_for

DEFAULT_URL = "http://127.0.0.1:8000"
USER_AGENT = "memoryconsole-client/0.1"
# Retried: the server may not have seen the request, or failed before committing anything.
RETRYABLE_STATUS = frozenset({500, 502, 503, 504})
IN_FLIGHT_TYPE = "/idempotency-in-flight"
# The 404 of a run that exists but has no checkpoint yet (any other 404: no such run).
NO_CHECKPOINT_TYPE = "/no-checkpoint"
# States in which an erasure job has stopped changing.
JOB_FINISHED = frozenset({"done", "failed"})


@dataclass(frozen=True)
class Call:
    """One API request. ``idempotent`` says whether a retry after the request may have
    reached the server is safe (true for GET, and for POST with its ``Idempotency-Key``)."""

    method: str
    path: str
    params: dict[str, Any] | None = None
    body: Any = None
    idempotency_key: str | None = None
    ok: tuple[int, ...] = (200, 201, 202)

    @property
    def idempotent(self) -> bool:
        return self.method == "GET" or self.idempotency_key is not None


@dataclass(frozen=True)
class RetryPolicy:
    """``retries`` extra attempts with exponential backoff from ``backoff`` seconds (with
    jitter) up to ``max_backoff``."""

    retries: int = 4
    backoff: float = 0.1
    max_backoff: float = 2.0

    def delay(self, attempt: int, response: httpx.Response | None = None) -> float:
        """Seconds before attempt ``attempt + 1``. A ``Retry-After`` (in seconds) on the
        answer is honoured, up to ``max_backoff``: the server knows when it expects to be
        back (the API sends one with its ``503`` while the database is away)."""
        base: float = min(self.max_backoff, self.backoff * (2**attempt))
        jittered = base / 2 + random.uniform(0, base / 2)  # noqa: S311 - jitter, not crypto
        asked = _retry_after(response)
        return max(jittered, min(asked, self.max_backoff)) if asked else jittered


def _retry_after(response: httpx.Response | None) -> float:
    if response is None:
        return 0.0
    try:
        return max(0.0, float(response.headers.get("Retry-After", "")))
    except ValueError:  # absent, or an HTTP date: the backoff alone decides
        return 0.0


@dataclass
class Settings:
    base_url: str
    token: str
    timeout: httpx.Timeout
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    # The latest X-Memory-Position a write answered: sent with every request, so a server
    # reading from replicas serves this client's reads only from one that has its writes.
    position: str | None = None

    @classmethod
    def resolve(
        cls,
        base_url: str | None,
        token: str | None,
        timeout: float | httpx.Timeout,
        retry: RetryPolicy | None,
    ) -> Settings:
        url = base_url or os.environ.get("MEMORYCONSOLE_URL") or DEFAULT_URL
        credential = token or os.environ.get("MEMORYCONSOLE_TOKEN")
        if not credential:
            raise ValueError("no agent credential: pass token= or set MEMORYCONSOLE_TOKEN")
        return cls(
            base_url=url.rstrip("/"),
            token=credential,
            timeout=timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(timeout),
            retry=retry or RetryPolicy(),
        )

    def headers(self) -> dict[str, str]:
        return {"Accept": "application/json", "User-Agent": USER_AGENT}

    def request_headers(self, call: Call) -> dict[str, str]:
        """The credential and the call's idempotency key. The credential goes with each
        request rather than on the connection pool, so clients of several credentials can
        share one pool (``transport=``) without ever sending one's token for another."""
        headers = {"Authorization": f"Bearer {self.token}"}
        if call.idempotency_key is not None:
            headers["Idempotency-Key"] = call.idempotency_key
        if self.position is not None:
            headers[POSITION_HEADER] = self.position
        return headers

    def remember(self, response: httpx.Response) -> None:
        """Keep the answer's ``X-Memory-Position`` when it is later than the one kept
        (read-your-writes across read replicas, docs/api.md)."""
        answered = response.headers.get(POSITION_HEADER)
        if answered and (self.position is None or _lsn(answered) > _lsn(self.position)):
            self.position = answered


POSITION_HEADER = "X-Memory-Position"


def _lsn(position: str) -> tuple[int, int]:
    """A PostgreSQL WAL position ("16/B374D848") as a comparable pair; an unreadable one
    sorts first, so it never replaces a readable one."""
    high, _, low = position.partition("/")
    try:
        return int(high, 16), int(low, 16)
    except ValueError:
        return (-1, -1)


def post(
    path: str, body: Any = None, *, idempotency_key: str | None, ok: tuple[int, ...] = (200, 201)
) -> Call:
    """A POST with its idempotency key: the caller's, or a fresh one reused by every retry."""
    return Call(
        "POST", path, body=body, idempotency_key=idempotency_key or str(uuid.uuid4()), ok=ok
    )


def get(path: str, params: dict[str, Any] | None = None) -> Call:
    return Call("GET", path, params=params)


def query(**params: Any) -> dict[str, Any]:
    """Query parameters without the unset ones (the server refuses unknown or empty ones)."""
    cleaned: dict[str, Any] = {}
    for name, value in params.items():
        if value is None:
            continue
        if isinstance(value, bool):
            value = "true" if value else "false"
        cleaned[name] = value
    return cleaned


def body(**fields: Any) -> dict[str, Any]:
    """A request body without the unset members."""
    return {name: value for name, value in fields.items() if value is not None}


def parse(response: httpx.Response) -> Any:
    if not response.content:
        return None
    try:
        return response.json()
    except ValueError:
        return response.text


def should_retry(call: Call, response: httpx.Response, parsed: Any) -> bool:
    if response.status_code in RETRYABLE_STATUS:
        return call.idempotent or response.status_code == 503
    in_flight = (
        response.status_code == 409
        and isinstance(parsed, dict)
        and str(parsed.get("type", "")).endswith(IN_FLIGHT_TYPE)
    )
    return in_flight


def retry_after_transport_error(call: Call, error: httpx.TransportError) -> bool:
    """A request that never left cannot have had an effect; one that may have arrived is
    only repeated when it is idempotent."""
    never_sent = isinstance(error, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout)
    return never_sent or call.idempotent


def result(call: Call, response: httpx.Response, parsed: Any) -> Any:
    if response.status_code in call.ok:
        return parsed
    raise error_for(response.status_code, parsed, method=call.method, path=call.path)


def on_server(base_url: str, call: Call) -> Call:
    """``call`` kept on the configured server. A call to a full URL (a page's ``next`` link,
    a job's ``url``) to another origin (say, the address a proxy used to reach the server)
    goes by its path and query to ``base_url``, so the credential never goes anywhere else."""
    if "://" not in call.path:
        return call
    target, base = httpx.URL(call.path), httpx.URL(base_url)
    if (target.scheme, target.host, target.port) == (base.scheme, base.host, base.port):
        return call
    return replace(call, path=target.raw_path.decode("ascii"))


def page_of(parsed: Any) -> tuple[list[Any], str | None]:
    """The items of one page and the next page's URL (lists arrive whole or cursor-paged)."""
    if isinstance(parsed, list):
        return parsed, None
    if isinstance(parsed, dict) and isinstance(parsed.get("results"), list):
        next_url = parsed.get("next")
        return parsed["results"], str(next_url) if next_url else None
    raise ApiError(200, parsed, method="GET", path="(page)")


EXPORT_MEDIA_TYPE = "application/x-ndjson"
EXPORT_END = "end"


def export_path(subject: str) -> str:
    """The export's path; the subject quoted whole (``:`` kept, ``/`` and the rest escaped)."""
    return f"/api/v1/subjects/{quote(subject, safe=':')}/export"


def export_item(line: str) -> dict[str, Any] | None:
    """One exported line, or None for a blank one."""
    if not line.strip():
        return None
    item = json.loads(line)
    if not isinstance(item, dict):
        raise ValueError(f"an export line is not a JSON object: {line[:80]!r}")
    return item


def export_cut_off(path: str) -> TransportError:
    """A stream that ended without its ``end`` line: the export is incomplete."""
    return TransportError(f"GET {path}: the export ended before its end line; retry it")
