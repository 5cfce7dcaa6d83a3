"""The synchronous client. ``AsyncMemoryConsole`` (``memoryconsole_client.aio``) has the same
surface with ``await``."""

from __future__ import annotations

import builtins
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, cast

import httpx

from . import _core
from ._core import JOB_FINISHED, Call, RetryPolicy, body, get, post, query
from .errors import NotFound, TransportError
from .models import (
    AuditEvent,
    BatchResult,
    Checkpoint,
    Conflict,
    DeletionReceipt,
    Episode,
    Fact,
    FactCheck,
    FactRef,
    Obligation,
    ObligationOpened,
    PromotionRequest,
    Purpose,
    Record,
    RecordWritten,
    RedactionInput,
    Resolution,
    RetentionInput,
    Run,
    ScopeInput,
    ScopeMatch,
    SearchResult,
    Sensitivity,
    SourceInput,
    Summary,
    SummarySource,
    Trust,
    Version,
)


class MemoryConsole:
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
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._settings = _core.Settings.resolve(base_url, token, timeout, retry)
        self._http = httpx.Client(
            base_url=self._settings.base_url,
            headers=self._settings.headers(),
            timeout=self._settings.timeout,
            transport=transport,
        )
        self.records = Records(self)
        self.facts = Facts(self)
        self.summaries = Summaries(self)
        self.runs = Runs(self)
        self.episodes = Episodes(self)
        self.checkpoints = Checkpoints(self)
        self.obligations = Obligations(self)
        self.erasures = Erasures(self)
        self.receipts = Receipts(self)
        self.audit_events = AuditEvents(self)
        self.promotion_requests = PromotionRequests(self)
        self.conflicts = Conflicts(self)
        self.subjects = Subjects(self)

    def __enter__(self) -> MemoryConsole:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def send(self, call: Call) -> Any:
        """Send ``call`` (retrying as the class says); the parsed answer, or an ``ApiError``."""
        return self.exchange(call)[1]

    def exchange(self, call: Call) -> tuple[int, Any]:
        """Like ``send``, with the answer's status code."""
        policy = self._settings.retry
        for attempt in range(policy.retries + 1):
            last = attempt == policy.retries
            try:
                response = self._http.request(
                    call.method,
                    call.path,
                    params=call.params,
                    json=call.body,
                    headers=self._settings.request_headers(call),
                )
            except httpx.TransportError as error:
                if last or not _core.retry_after_transport_error(call, error):
                    raise TransportError(f"{call.method} {call.path}: {error!r}") from error
                time.sleep(policy.delay(attempt))
                continue
            self._settings.remember(response)
            parsed = _core.parse(response)
            if not last and _core.should_retry(call, response, parsed):
                time.sleep(policy.delay(attempt, response))
                continue
            return response.status_code, _core.result(call, response, parsed)
        raise AssertionError("unreachable")  # pragma: no cover

    def pages(self, call: Call) -> Iterator[Any]:
        """Every item of a listing, following the cursor from page to page."""
        while True:
            items, next_url = _core.page_of(self.send(call))
            yield from items
            if next_url is None:
                return
            call = _core.same_server(self._settings.base_url, next_url)

    def me(self) -> dict[str, Any]:
        """The credential: its tenant and actions."""
        return cast(dict[str, Any], self.send(get("/api/v1/me")))

    def search(
        self,
        query: str | None = None,
        *,
        vector: list[float] | None = None,
        scope: dict[str, Any] | None = None,
        purpose: Purpose | None = None,
        top_k: int | None = None,
        subject: str | None = None,
        keys: list[str] | None = None,
        sensitivity_max: Sensitivity | None = None,
        as_of: str | None = None,
        min_similarity: float | None = None,
        scope_match: ScopeMatch | None = None,
        idempotency_key: str | None = None,
    ) -> SearchResult:
        """Scoped retrieval by meaning and words. A memory applies when its scope is contained
        in ``scope`` (``scope_match="exact"``: the named parts equal); ``purpose="decision"``
        returns confirmed items only and needs ``scope["domain"]``. With no hits, the
        result's ``abstention`` says why."""
        payload = body(
            query=query,
            vector=vector,
            scope=scope,
            purpose=purpose,
            top_k=top_k,
            subject=subject,
            keys=keys,
            sensitivity_max=sensitivity_max,
            as_of=as_of,
            min_similarity=min_similarity,
            scope_match=scope_match,
        )
        call = post("/api/v1/search", payload, idempotency_key=idempotency_key, ok=(200,))
        return cast(SearchResult, self.send(call))


class _Resource:
    def __init__(self, client: MemoryConsole) -> None:
        self._c = client


class Records(_Resource):
    """Memory records: the write boundary and what follows from it."""

    def write(
        self,
        *,
        key: str,
        subject: str,
        value: Any,
        source: SourceInput,
        observed_at: str,
        owner: str,
        reason: str,
        scope: ScopeInput,
        sensitivity: Sensitivity,
        retention: RetentionInput,
        content: str | None = None,
        redaction: RedactionInput | None = None,
        vector: builtins.list[float] | None = None,
        idempotency_key: str | None = None,
    ) -> RecordWritten:
        """Write a memory (``201``); ``outcome`` says whether it created a fact, observed an
        existing one again, or opened a conflict."""
        payload = body(
            key=key,
            subject=subject,
            value=value,
            content=content,
            source=source,
            observed_at=observed_at,
            owner=owner,
            reason=reason,
            scope=scope,
            sensitivity=sensitivity,
            retention=retention,
            redaction=redaction,
            vector=vector,
        )
        payload["value"] = value  # null is a value
        call = post("/api/v1/records", payload, idempotency_key=idempotency_key)
        return cast(RecordWritten, self._c.send(call))

    def write_batch(
        self,
        items: Sequence[Mapping[str, Any]],
        *,
        idempotency_key: str | None = None,
    ) -> BatchResult:
        """Write up to 500 memories in one request, each item a ``write``'s keyword arguments
        as a dict. Answered per item, in order (``result["items"][i]["status"]``: what
        ``write`` would have got; ``record`` for a 2xx, ``error`` for a refusal): a refused
        item stores nothing and raises nothing; the others are written. One idempotency key
        covers the batch, so a retry writes nothing twice."""
        payload = {"items": [dict(item) for item in items]}
        call = post("/api/v1/records/batch", payload, idempotency_key=idempotency_key, ok=(200,))
        return cast(BatchResult, self._c.send(call))

    def get(self, record_id: str) -> Record:
        """One record with its provenance, version chain and derived artifacts."""
        return cast(Record, self._c.send(get(f"/api/v1/records/{record_id}")))

    def list(
        self,
        *,
        subject: str | None = None,
        key: str | None = None,
        domain: str | None = None,
        task_type: str | None = None,
        trust: str | None = None,
        status: str | None = None,
        sensitivity: str | None = None,
        page_size: int | None = None,
    ) -> Iterator[Record]:
        """Every matching live record, page after page (``page_size`` per request)."""
        params = query(
            subject=subject,
            key=key,
            domain=domain,
            task_type=task_type,
            trust=trust,
            status=status,
            sensitivity=sensitivity,
            page_size=page_size,
        )
        return cast(Iterator[Record], self._c.pages(get("/api/v1/records", params)))

    def history(self, record_id: str) -> builtins.list[Version]:
        """Every version of the record's fact, oldest first, superseded ones included."""
        answer = self._c.send(get(f"/api/v1/records/{record_id}/history"))
        return cast(builtins.list[Version], answer["versions"])

    def delete(
        self, record_id: str, *, reason: str | None = None, dry_run: bool = False
    ) -> DeletionReceipt:
        """Delete the record and what was derived from it; the deletion receipt. ``reason``
        (at most 2,000 characters) is kept on the receipt and in the audit event; without one
        they say "deleted through the API". With ``dry_run`` the server reports what would be
        removed and changes nothing."""
        call = Call(
            "DELETE",
            f"/api/v1/records/{record_id}",
            params=query(dry_run=True) if dry_run else None,
            body=body(reason=reason) or None,
            ok=(200,),
        )
        return cast(DeletionReceipt, self._c.send(call))

    def redact(
        self,
        record_id: str,
        *,
        fields: builtins.list[str],
        reason: str,
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        """Rewrite the stored content without ``fields``; derived summaries are invalidated."""
        call = post(
            f"/api/v1/records/{record_id}/redact",
            {"fields": fields, "reason": reason},
            idempotency_key=idempotency_key,
        )
        return cast(dict[str, Any], self._c.send(call))

    def request_promotion(
        self,
        record_id: str,
        *,
        reason: str,
        evidence: Any = None,
        idempotency_key: str | None = None,
    ) -> PromotionRequest:
        """Ask a reviewer to confirm the record (evidence from an independent source)."""
        call = post(
            f"/api/v1/records/{record_id}/promotion-requests",
            body(evidence=evidence, reason=reason),
            idempotency_key=idempotency_key,
        )
        return cast(PromotionRequest, self._c.send(call))


class Facts(_Resource):
    """The state layer's read of records: the current version of each scoped fact."""

    def list(
        self,
        subject: str,
        *,
        domain: str | None = None,
        task_type: str | None = None,
        conditions: str | None = None,
        as_of: str | None = None,
        trust: Trust | None = None,
        page_size: int | None = None,
        fresh: bool | None = None,
    ) -> Iterator[Fact]:
        """Every current fact of the subject (with ``as_of``, what the memory held then),
        page after page (``page_size`` per request), by key. Before an irreversible step, ask
        for ``trust="confirmed"``: a fact whose current value is provisional is then left out.
        Each fact says who confirmed it (``confirmed_by``) and its open conflict
        (``in_conflict``, ``conflict``). ``fresh=True`` reads the primary database where the
        deployment has read replicas."""
        params = query(
            subject=subject,
            domain=domain,
            task_type=task_type,
            conditions=conditions,
            as_of=as_of,
            trust=trust,
            page_size=page_size,
            fresh=fresh,
        )
        return cast(Iterator[Fact], self._c.pages(get("/api/v1/facts", params)))

    def check(
        self,
        facts: builtins.list[FactRef],
        *,
        trust: Trust | None = None,
        idempotency_key: str | None = None,
    ) -> builtins.list[FactCheck]:
        """For each fact held in context, whether it is still current (a stale one names
        the reason and the current version), and whether it is ``safe_to_act`` on: current,
        in no open conflict and confirmed (``trust="provisional"`` accepts a provisional one,
        for a step that can be undone); ``unsafe_reasons`` says why not."""
        call = post(
            "/api/v1/facts/check",
            body(facts=facts, trust=trust),
            idempotency_key=idempotency_key,
            ok=(200,),
        )
        return cast(builtins.list[FactCheck], self._c.send(call)["facts"])


class Summaries(_Resource):
    """Summaries: derived text that cites its sources."""

    def create(
        self,
        *,
        text: str,
        sources: builtins.list[SummarySource],
        reason: str,
        vector: builtins.list[float] | None = None,
        idempotency_key: str | None = None,
    ) -> Summary:
        """Store a summary of ``sources`` (records or episodes); refused without sources."""
        call = post(
            "/api/v1/summaries",
            body(text=text, sources=sources, reason=reason, vector=vector),
            idempotency_key=idempotency_key,
        )
        return cast(Summary, self._c.send(call))

    def get(self, summary_id: str) -> Summary:
        """A summary; ``valid`` is false once a source changed, with why."""
        return cast(Summary, self._c.send(get(f"/api/v1/summaries/{summary_id}")))


class Runs(_Resource):
    """Runs of a task: the container of episodes and checkpoints."""

    def open(
        self,
        *,
        task_id: str,
        owner: str,
        subject: str | None = None,
        idempotency_key: str | None = None,
    ) -> Run:
        """Open a run for ``task_id`` (pass ``idempotency_key`` to make a retried open,
        even from another process, return the same run)."""
        call = post(
            "/api/v1/runs",
            body(task_id=task_id, owner=owner, subject=subject),
            idempotency_key=idempotency_key,
        )
        return cast(Run, self._c.send(call))

    def get(self, run_id: str) -> Run:
        """One run."""
        return cast(Run, self._c.send(get(f"/api/v1/runs/{run_id}")))

    def list(
        self,
        *,
        task_id: str | None = None,
        state: str | None = None,
        page_size: int | None = None,
    ) -> Iterator[Run]:
        """Every run (newest first), filtered by task or state."""
        params = query(task_id=task_id, state=state, page_size=page_size)
        return cast(Iterator[Run], self._c.pages(get("/api/v1/runs", params)))

    def close(self, run_id: str, *, idempotency_key: str | None = None) -> Run:
        """Close the run: its episodes are discarded and summaries citing them invalidated."""
        call = post(f"/api/v1/runs/{run_id}/close", idempotency_key=idempotency_key, ok=(200,))
        return cast(Run, self._c.send(call))


class Episodes(_Resource):
    """A run's trace."""

    def add(
        self,
        run_id: str,
        *,
        role: str,
        content: str | None = None,
        content_ref: str | None = None,
        idempotency_key: str | None = None,
    ) -> Episode:
        """Append an episode (``content`` or ``content_ref``) to an open run."""
        call = post(
            f"/api/v1/runs/{run_id}/episodes",
            body(role=role, content=content, content_ref=content_ref),
            idempotency_key=idempotency_key,
        )
        return cast(Episode, self._c.send(call))

    def list(self, run_id: str, *, page_size: int | None = None) -> Iterator[Episode]:
        """The run's episodes in the order appended."""
        call = get(f"/api/v1/runs/{run_id}/episodes", query(page_size=page_size))
        return cast(Iterator[Episode], self._c.pages(call))


class Checkpoints(_Resource):
    """A run's checkpoints: where a restarted agent resumes."""

    def save(
        self, run_id: str, *, step: int, state: Any, idempotency_key: str | None = None
    ) -> Checkpoint:
        """Record the state after ``step`` (the same step and state again is a no-op; a step
        behind the latest is a ``Conflict``)."""
        call = post(
            f"/api/v1/runs/{run_id}/checkpoints",
            {"step": step, "state": state},
            idempotency_key=idempotency_key,
        )
        return cast(Checkpoint, self._c.send(call))

    def latest(self, run_id: str) -> Checkpoint | None:
        """The run's latest checkpoint, or ``None`` when it has none yet. A run that does not
        exist (or is another tenant's) raises ``NotFound``: starting from scratch on it
        would be a mistake, not a fresh start."""
        try:
            answer = self._c.send(get(f"/api/v1/runs/{run_id}/checkpoints/latest"))
        except NotFound as missing:
            if missing.type.endswith(_core.NO_CHECKPOINT_TYPE):
                return None
            raise
        return cast(Checkpoint, answer)


class Obligations(_Resource):
    """Exactly-once work: open by key, commit once."""

    def open(
        self,
        *,
        task_id: str,
        kind: str,
        key: str,
        depends_on: builtins.list[str] | None = None,
        deadline: str | None = None,
        payload: Any = None,
        subject: str | None = None,
        idempotency_key: str | None = None,
    ) -> ObligationOpened:
        """Open the obligation ``key`` (``created`` true), or return the existing one with
        that key unchanged (``created`` false), committed or not."""
        call = post(
            "/api/v1/obligations",
            body(
                task_id=task_id,
                kind=kind,
                key=key,
                depends_on=depends_on or [],
                deadline=deadline,
                payload=payload,
                subject=subject,
            ),
            idempotency_key=idempotency_key,
        )
        status, answer = self._c.exchange(call)
        opened = cast(ObligationOpened, answer)
        opened["created"] = status == 201
        return opened

    def get(self, obligation_id: str) -> Obligation:
        """One obligation."""
        return cast(Obligation, self._c.send(get(f"/api/v1/obligations/{obligation_id}")))

    def commit(
        self, obligation_id: str, *, result: Any, idempotency_key: str | None = None
    ) -> Obligation:
        """Commit the work's ``result``. Exactly once: a later or concurrent commit raises
        ``Conflict`` whose ``body`` is the committed obligation (with the winner's result)."""
        call = post(
            f"/api/v1/obligations/{obligation_id}/commit",
            {"result": result},
            idempotency_key=idempotency_key,
            ok=(200,),
        )
        return cast(Obligation, self._c.send(call))

    def list(
        self,
        *,
        task_id: str | None = None,
        state: str | None = None,
        overdue: bool | None = None,
        page_size: int | None = None,
    ) -> Iterator[Obligation]:
        """Every obligation (oldest first), filtered by task, state or being overdue."""
        params = query(task_id=task_id, state=state, overdue=overdue, page_size=page_size)
        return cast(Iterator[Obligation], self._c.pages(get("/api/v1/obligations", params)))


class Erasures(_Resource):
    """Erasure of everything about a subject, an owner or a consent."""

    def create(
        self,
        *,
        reason: str,
        subject: str | None = None,
        owner: str | None = None,
        consent_ref: str | None = None,
        dry_run: bool | None = None,
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        """Erase (or with ``dry_run`` count) what matches; the receipts and totals, or for a
        large erasure the job (``202``) to follow with ``job``."""
        call = post(
            "/api/v1/erasures",
            body(
                subject=subject,
                owner=owner,
                consent_ref=consent_ref,
                reason=reason,
                dry_run=dry_run,
            ),
            idempotency_key=idempotency_key,
            ok=(200, 201, 202),
        )
        return cast(dict[str, Any], self._c.send(call))

    def job(self, url: str) -> dict[str, Any]:
        """A large erasure's job (the ``url`` of ``create``'s ``202`` answer): state,
        progress and, when done, totals and receipt."""
        call = _core.same_server(self._c._settings.base_url, url)
        return cast(dict[str, Any], self._c.send(call))

    def wait(
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
            time.sleep(interval)
            job = self.job(str(job["url"]))
        return job


class Receipts(_Resource):
    """Deletion receipts (credentials with the ``audit`` action)."""

    def list(
        self, *, parent: str | None = None, kind: str | None = None, page_size: int | None = None
    ) -> Iterator[DeletionReceipt]:
        """Every deletion receipt of the tenant, newest first; ``parent`` lists one
        erasure's receipts, ``kind`` one kind of receipt."""
        call = get(
            "/api/v1/deletion-receipts", query(parent=parent, kind=kind, page_size=page_size)
        )
        return cast(Iterator[DeletionReceipt], self._c.pages(call))

    def get(self, receipt_id: str) -> DeletionReceipt:
        """One deletion receipt."""
        return cast(DeletionReceipt, self._c.send(get(f"/api/v1/deletion-receipts/{receipt_id}")))


class AuditEvents(_Resource):
    """The tenant's audit trail (credentials with the ``audit`` action)."""

    def list(
        self,
        *,
        record: str | None = None,
        action: str | None = None,
        actor: str | None = None,
        since: str | None = None,
        page_size: int | None = None,
    ) -> Iterator[AuditEvent]:
        """Every matching audit event, page after page."""
        params = query(record=record, action=action, actor=actor, since=since, page_size=page_size)
        return cast(Iterator[AuditEvent], self._c.pages(get("/api/v1/audit-events", params)))


class PromotionRequests(_Resource):
    """The promotion queue (credentials with the ``review`` action): a record becomes
    confirmed when a reviewer approves it. A credential never approves a record it wrote."""

    def list(
        self, *, state: str | None = None, page_size: int | None = None
    ) -> Iterator[PromotionRequest]:
        """Every promotion request (newest first), filtered by ``state`` (open, approved,
        rejected...), page after page."""
        params = query(state=state, page_size=page_size)
        call = get("/api/v1/promotion-requests", params)
        return cast(Iterator[PromotionRequest], self._c.pages(call))

    def approve(
        self, request_id: str, *, reason: str, idempotency_key: str | None = None
    ) -> PromotionRequest:
        """Approve: the record becomes confirmed. ``reason`` is kept with the decision."""
        return self._decide(request_id, "approve", reason, idempotency_key)

    def reject(
        self, request_id: str, *, reason: str, idempotency_key: str | None = None
    ) -> PromotionRequest:
        """Reject: the record stays provisional (and expires as such)."""
        return self._decide(request_id, "reject", reason, idempotency_key)

    def _decide(
        self, request_id: str, decision: str, reason: str, idempotency_key: str | None
    ) -> PromotionRequest:
        call = post(
            f"/api/v1/promotion-requests/{request_id}/{decision}",
            {"reason": reason},
            idempotency_key=idempotency_key,
            ok=(200,),
        )
        return cast(PromotionRequest, self._c.send(call))


class Conflicts(_Resource):
    """Contradicting values of one fact, waiting for review (``review`` action). A
    credential never resolves a conflict in which it wrote either version."""

    def list(self, *, state: str | None = None, page_size: int | None = None) -> Iterator[Conflict]:
        """Every conflict (newest first), filtered by ``state`` (open, resolved), page after
        page."""
        call = get("/api/v1/conflicts", query(state=state, page_size=page_size))
        return cast(Iterator[Conflict], self._c.pages(call))

    def resolve(
        self,
        conflict_id: str,
        *,
        resolution: Resolution,
        reason: str,
        value: Any = None,
        idempotency_key: str | None = None,
    ) -> Conflict:
        """Resolve: ``keep_current``, ``accept_new``, or ``corrected`` with the ``value``
        (an agent's correction is a new provisional version). The losing version becomes
        superseded, never deleted."""
        call = post(
            f"/api/v1/conflicts/{conflict_id}/resolve",
            body(resolution=resolution, reason=reason, value=value),
            idempotency_key=idempotency_key,
            ok=(200,),
        )
        return cast(Conflict, self._c.send(call))


class Subjects(_Resource):
    """What the tenant holds about a subject (credentials with the ``audit`` action)."""

    def export(self, subject: str) -> Iterator[dict[str, Any]]:
        """Everything the tenant holds about ``subject``, item by item as the server streams
        it (``memoryconsole.export/1``, docs/export.md): the ``header`` first, then facts with
        their versions, legal holds, runs, obligations, summaries, deletion receipts and audit
        events, the ``end`` item (with the counts) last. A stream cut off before its ``end``
        raises ``TransportError``; an error answer raises before the first item."""
        path = _core.export_path(subject)
        headers = {**self._c._settings.request_headers(get(path))}
        headers["Accept"] = _core.EXPORT_MEDIA_TYPE
        try:
            with self._c._http.stream("GET", path, headers=headers) as response:
                if response.status_code != 200:
                    response.read()
                    _core.result(get(path), response, _core.parse(response))
                last = None
                for line in response.iter_lines():
                    item = _core.export_item(line)
                    if item is not None:
                        last = item
                        yield item
        except httpx.TransportError as error:
            raise TransportError(f"GET {path}: {error!r}") from error
        if last is None or last.get("type") != _core.EXPORT_END:
            raise _core.export_cut_off(path)
