"""The asynchronous client: the surface of ``MemoryConsole`` (``client.py``), awaited; both
take their endpoints from ``_endpoints``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx

from . import _core, _endpoints
from ._core import JOB_FINISHED, Call, RetryPolicy, get
from ._endpoints import Awaiting
from .errors import NotFound, TransportError


class AsyncMemoryConsole(_endpoints.Client[Awaiting]):
    """A client of one Memory Console server with one agent credential.

    ``base_url`` and ``token`` default to ``MEMORYCONSOLE_URL`` and ``MEMORYCONSOLE_TOKEN``.
    Every POST carries an ``Idempotency-Key`` (yours, or a generated one) that automatic
    retries reuse, so a retried write has one effect. Retries (with backoff) cover connection
    errors, 5xx and the in-flight ``409``; other 4xx raise at once.
    """

    def __init__(
        self,
        base_url: str | None = None,
        token: str | None = None,
        *,
        timeout: float | httpx.Timeout = 30.0,
        retry: RetryPolicy | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._settings = _core.Settings.resolve(base_url, token, timeout, retry)
        self._http = httpx.AsyncClient(
            base_url=self._settings.base_url,
            headers=self._settings.headers(),
            timeout=self._settings.timeout,
            transport=transport,
        )
        self._resources()
        self.erasures = Erasures(self)
        self.subjects = Subjects(self)

    async def __aenter__(self) -> AsyncMemoryConsole:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def send(self, call: Call) -> Any:
        """Send ``call`` (retrying as the class says); the parsed answer, or an ``ApiError``."""
        return (await self.exchange(call))[1]

    async def exchange(self, call: Call) -> tuple[int, Any]:
        """Like ``send``, with the answer's status code."""
        call = _core.on_server(self._settings.base_url, call)
        policy = self._settings.retry
        for attempt in range(policy.retries + 1):
            last = attempt == policy.retries
            try:
                response = await self._http.request(
                    call.method,
                    call.path,
                    params=call.params,
                    json=call.body,
                    headers=self._settings.request_headers(call),
                )
            except httpx.TransportError as error:
                if last or not _core.retry_after_transport_error(call, error):
                    raise TransportError(f"{call.method} {call.path}: {error!r}") from error
                await asyncio.sleep(policy.delay(attempt))
                continue
            self._settings.remember(response)
            parsed = _core.parse(response)
            if not last and _core.should_retry(call, response, parsed):
                await asyncio.sleep(policy.delay(attempt, response))
                continue
            return response.status_code, _core.result(call, response, parsed)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _run(self, request: _endpoints.Request[Any]) -> Any:
        """Send a described request; its answer as the description reads it."""
        try:
            status, parsed = await self.exchange(request.call)
        except NotFound as missing:
            if request.absent and missing.type.endswith(request.absent):
                return None
            raise
        return request.read(status, parsed)

    async def pages(self, call: Call) -> AsyncIterator[Any]:
        """Every item of a listing, following the cursor from page to page."""
        while True:
            items, next_url = _core.page_of(await self.send(call))
            for item in items:
                yield item
            if next_url is None:
                return
            call = get(next_url)


class Erasures(_endpoints.Erasures[Awaiting]):
    __doc__ = _endpoints.Erasures.__doc__

    async def wait(
        self, erasure: dict[str, Any], *, timeout: float = 300.0, interval: float = 1.0
    ) -> dict[str, Any]:
        """The finished erasure: ``create``'s answer itself when it ran at once, else its
        job, asked again every ``interval`` seconds until ``done`` or ``failed``
        (``TimeoutError`` after ``timeout`` seconds)."""
        if "url" not in erasure or "state" not in erasure:
            return erasure  # erased at once: the receipt and totals are in the answer
        deadline = time.monotonic() + timeout
        job = erasure
        while job["state"] not in JOB_FINISHED:
            if time.monotonic() > deadline:
                raise TimeoutError(f"erasure job {job['id']} still {job['state']}")
            await asyncio.sleep(interval)
            job = await self.job(str(job["url"]))
        return job


class Subjects:
    """What the tenant holds about a subject (credentials with the ``audit`` action)."""

    def __init__(self, client: AsyncMemoryConsole) -> None:
        self._c = client

    async def export(self, subject: str) -> AsyncIterator[dict[str, Any]]:
        """Everything the tenant holds about ``subject``, item by item as the server streams
        it (``memoryconsole.export/1``, docs/export.md): the ``header`` first, then facts with
        their versions, legal holds, runs, obligations, summaries, deletion receipts and audit
        events, the ``end`` item (with the counts) last. A stream cut off before its ``end``
        raises ``TransportError``; an error answer raises before the first item."""
        path = _core.export_path(subject)
        headers = {**self._c._settings.request_headers(get(path))}
        headers["Accept"] = _core.EXPORT_MEDIA_TYPE
        try:
            async with self._c._http.stream("GET", path, headers=headers) as response:
                if response.status_code != 200:
                    await response.aread()
                    _core.result(get(path), response, _core.parse(response))
                last = None
                async for line in response.aiter_lines():
                    item = _core.export_item(line)
                    if item is not None:
                        last = item
                        yield item
        except httpx.TransportError as error:
            raise TransportError(f"GET {path}: {error!r}") from error
        if last is None or last.get("type") != _core.EXPORT_END:
            raise _core.export_cut_off(path)
