"""Every endpoint of the API, written once for both clients.

Each method here only describes its request (a :class:`Request` for one answer, a
:class:`Page` for a listing); :func:`endpoint` and :func:`listing` turn it into the public
method, which hands the description to the client that owns the resource. ``MemoryConsole``
sends it and returns the answer; ``AsyncMemoryConsole`` returns an awaitable of it (and an
async iterator for a listing). The mode (:class:`Blocking` or :class:`Awaiting`) exists for
the type checker only: it picks the return type of each method.
"""

from __future__ import annotations

import builtins
import functools
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Concatenate, Generic, ParamSpec, Protocol, TypeVar, cast, overload

from ._core import NO_CHECKPOINT_TYPE, Call, body, get, post, query
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

P = ParamSpec("P")
T = TypeVar("T")
M = TypeVar("M")


class Blocking:
    """The mode of ``MemoryConsole``: a method returns its answer."""


class Awaiting:
    """The mode of ``AsyncMemoryConsole``: a method returns an awaitable of its answer."""


def _parsed(status: int, parsed: Any) -> Any:
    return parsed


@dataclass(frozen=True)
class Request(Generic[T]):
    """One request and how to read its answer: ``read(status, parsed body)``. A ``NotFound``
    whose problem type ends with ``absent`` is the answer ``None``."""

    call: Call
    read: Callable[[int, Any], T] = _parsed
    absent: str | None = None


@dataclass(frozen=True)
class Page(Generic[T]):
    """The first page of a listing; the client follows its cursor."""

    call: Call


class Sender(Protocol):
    """What a client does with a description: run a request, iterate the ``pages``."""

    def _run(self, request: Request[Any]) -> Any: ...

    def pages(self, call: Call) -> Any: ...


class Resource(Generic[M]):
    def __init__(self, client: Sender) -> None:
        self._c = client


def _public_signature(build: Callable[..., Any]) -> inspect.Signature:
    """``build``'s parameters without ``self``, and no return annotation (``build`` returns the
    description, the method its answer): what ``inspect.signature`` shows a caller."""
    signature = inspect.signature(build)
    return signature.replace(
        parameters=list(signature.parameters.values())[1:],
        return_annotation=inspect.Signature.empty,
    )


class _Method(Generic[P, T]):
    def __init__(self, build: Callable[Concatenate[Any, P], Any]) -> None:
        self.build = build
        self.signature = _public_signature(build)

    def _bind(self, instance: Resource[Any], send: Callable[[Any], Any]) -> Callable[..., Any]:
        build = self.build

        def method(*args: Any, **kwargs: Any) -> Any:
            return send(build(instance, *args, **kwargs))

        functools.update_wrapper(method, build)
        del method.__wrapped__  # type: ignore[attr-defined]
        method.__signature__ = self.signature  # type: ignore[attr-defined]
        return method


class endpoint(_Method[P, T]):
    """The public method of one request: its answer, or an awaitable of it."""

    @overload
    def __get__(self, instance: None, owner: type) -> endpoint[P, T]: ...
    @overload
    def __get__(self, instance: Resource[Blocking], owner: type) -> Callable[P, T]: ...
    @overload
    def __get__(self, instance: Resource[Awaiting], owner: type) -> Callable[P, Awaitable[T]]: ...
    def __get__(self, instance: Resource[Any] | None, owner: type) -> Any:
        if instance is None:
            return self
        return self._bind(instance, instance._c._run)

    def __init__(self, build: Callable[Concatenate[Any, P], Request[T]]) -> None:
        super().__init__(build)


class listing(_Method[P, T]):
    """The public method of a listing: every item, page after page."""

    @overload
    def __get__(self, instance: None, owner: type) -> listing[P, T]: ...
    @overload
    def __get__(self, instance: Resource[Blocking], owner: type) -> Callable[P, Iterator[T]]: ...
    @overload
    def __get__(
        self, instance: Resource[Awaiting], owner: type
    ) -> Callable[P, AsyncIterator[T]]: ...
    def __get__(self, instance: Resource[Any] | None, owner: type) -> Any:
        if instance is None:
            return self
        return self._bind(instance, lambda page: instance._c.pages(page.call))

    def __init__(self, build: Callable[Concatenate[Any, P], Page[T]]) -> None:
        super().__init__(build)


class Client(Resource[M]):
    """The requests made of the client itself, and its resources."""

    def _resources(self) -> None:
        self._c = cast(Sender, self)
        self.records: Records[M] = Records(self._c)
        self.facts: Facts[M] = Facts(self._c)
        self.summaries: Summaries[M] = Summaries(self._c)
        self.runs: Runs[M] = Runs(self._c)
        self.episodes: Episodes[M] = Episodes(self._c)
        self.checkpoints: Checkpoints[M] = Checkpoints(self._c)
        self.obligations: Obligations[M] = Obligations(self._c)
        self.receipts: Receipts[M] = Receipts(self._c)
        self.audit_events: AuditEvents[M] = AuditEvents(self._c)
        self.promotion_requests: PromotionRequests[M] = PromotionRequests(self._c)
        self.conflicts: Conflicts[M] = Conflicts(self._c)

    @endpoint
    def me(self) -> Request[dict[str, Any]]:
        """The credential: its tenant and actions."""
        return Request(get("/api/v1/me"))

    @endpoint
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
    ) -> Request[SearchResult]:
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
        return Request(post("/api/v1/search", payload, idempotency_key=idempotency_key, ok=(200,)))


class Records(Resource[M]):
    """Memory records: the write boundary and what follows from it."""

    @endpoint
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
    ) -> Request[RecordWritten]:
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
        return Request(post("/api/v1/records", payload, idempotency_key=idempotency_key))

    @endpoint
    def write_batch(
        self,
        items: Sequence[Mapping[str, Any]],
        *,
        idempotency_key: str | None = None,
    ) -> Request[BatchResult]:
        """Write up to 500 memories in one request, each item a ``write``'s keyword arguments
        as a dict. Answered per item, in order (``result["items"][i]["status"]``: what
        ``write`` would have got; ``record`` for a 2xx, ``error`` for a refusal): a refused
        item stores nothing and raises nothing; the others are written. One idempotency key
        covers the batch, so a retry writes nothing twice."""
        payload = {"items": [dict(item) for item in items]}
        call = post("/api/v1/records/batch", payload, idempotency_key=idempotency_key, ok=(200,))
        return Request(call)

    @endpoint
    def get(self, record_id: str) -> Request[Record]:
        """One record with its provenance, version chain and derived artifacts."""
        return Request(get(f"/api/v1/records/{record_id}"))

    @listing
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
    ) -> Page[Record]:
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
        return Page(get("/api/v1/records", params))

    @endpoint
    def history(self, record_id: str) -> Request[builtins.list[Version]]:
        """Every version of the record's fact, oldest first, superseded ones included."""
        return Request(get(f"/api/v1/records/{record_id}/history"), _member("versions"))

    @endpoint
    def delete(
        self, record_id: str, *, reason: str | None = None, dry_run: bool = False
    ) -> Request[DeletionReceipt]:
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
        return Request(call)

    @endpoint
    def redact(
        self,
        record_id: str,
        *,
        fields: builtins.list[str],
        reason: str,
        idempotency_key: str | None = None,
    ) -> Request[dict[str, Any]]:
        """Rewrite the stored content without ``fields``; derived summaries are invalidated."""
        call = post(
            f"/api/v1/records/{record_id}/redact",
            {"fields": fields, "reason": reason},
            idempotency_key=idempotency_key,
        )
        return Request(call)

    @endpoint
    def request_promotion(
        self,
        record_id: str,
        *,
        reason: str,
        evidence: Any = None,
        idempotency_key: str | None = None,
    ) -> Request[PromotionRequest]:
        """Ask a reviewer to confirm the record (evidence from an independent source)."""
        call = post(
            f"/api/v1/records/{record_id}/promotion-requests",
            body(evidence=evidence, reason=reason),
            idempotency_key=idempotency_key,
        )
        return Request(call)


class Facts(Resource[M]):
    """The state layer's read of records: the current version of each scoped fact."""

    @listing
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
    ) -> Page[Fact]:
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
        return Page(get("/api/v1/facts", params))

    @endpoint
    def check(
        self,
        facts: builtins.list[FactRef],
        *,
        trust: Trust | None = None,
        idempotency_key: str | None = None,
    ) -> Request[builtins.list[FactCheck]]:
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
        return Request(call, _member("facts"))


class Summaries(Resource[M]):
    """Summaries: derived text that cites its sources."""

    @endpoint
    def create(
        self,
        *,
        text: str,
        sources: builtins.list[SummarySource],
        reason: str,
        vector: builtins.list[float] | None = None,
        idempotency_key: str | None = None,
    ) -> Request[Summary]:
        """Store a summary of ``sources`` (records or episodes); refused without sources."""
        call = post(
            "/api/v1/summaries",
            body(text=text, sources=sources, reason=reason, vector=vector),
            idempotency_key=idempotency_key,
        )
        return Request(call)

    @endpoint
    def get(self, summary_id: str) -> Request[Summary]:
        """A summary; ``valid`` is false once a source changed, with why."""
        return Request(get(f"/api/v1/summaries/{summary_id}"))


class Runs(Resource[M]):
    """Runs of a task: the container of episodes and checkpoints."""

    @endpoint
    def open(
        self,
        *,
        task_id: str,
        owner: str,
        subject: str | None = None,
        idempotency_key: str | None = None,
    ) -> Request[Run]:
        """Open a run for ``task_id`` (pass ``idempotency_key`` to make a retried open,
        even from another process, return the same run)."""
        call = post(
            "/api/v1/runs",
            body(task_id=task_id, owner=owner, subject=subject),
            idempotency_key=idempotency_key,
        )
        return Request(call)

    @endpoint
    def get(self, run_id: str) -> Request[Run]:
        """One run."""
        return Request(get(f"/api/v1/runs/{run_id}"))

    @listing
    def list(
        self,
        *,
        task_id: str | None = None,
        state: str | None = None,
        page_size: int | None = None,
    ) -> Page[Run]:
        """Every run (newest first), filtered by task or state."""
        return Page(get("/api/v1/runs", query(task_id=task_id, state=state, page_size=page_size)))

    @endpoint
    def close(self, run_id: str, *, idempotency_key: str | None = None) -> Request[Run]:
        """Close the run: its episodes are discarded and summaries citing them invalidated."""
        return Request(
            post(f"/api/v1/runs/{run_id}/close", idempotency_key=idempotency_key, ok=(200,))
        )


class Episodes(Resource[M]):
    """A run's trace."""

    @endpoint
    def add(
        self,
        run_id: str,
        *,
        role: str,
        content: str | None = None,
        content_ref: str | None = None,
        idempotency_key: str | None = None,
    ) -> Request[Episode]:
        """Append an episode (``content`` or ``content_ref``) to an open run."""
        call = post(
            f"/api/v1/runs/{run_id}/episodes",
            body(role=role, content=content, content_ref=content_ref),
            idempotency_key=idempotency_key,
        )
        return Request(call)

    @listing
    def list(self, run_id: str, *, page_size: int | None = None) -> Page[Episode]:
        """The run's episodes in the order appended."""
        return Page(get(f"/api/v1/runs/{run_id}/episodes", query(page_size=page_size)))


class Checkpoints(Resource[M]):
    """A run's checkpoints: where a restarted agent resumes."""

    @endpoint
    def save(
        self, run_id: str, *, step: int, state: Any, idempotency_key: str | None = None
    ) -> Request[Checkpoint]:
        """Record the state after ``step`` (the same step and state again is a no-op; a step
        behind the latest is a ``Conflict``)."""
        call = post(
            f"/api/v1/runs/{run_id}/checkpoints",
            {"step": step, "state": state},
            idempotency_key=idempotency_key,
        )
        return Request(call)

    @endpoint
    def latest(self, run_id: str) -> Request[Checkpoint | None]:
        """The run's latest checkpoint, or ``None`` when it has none yet. A run that does not
        exist (or is another tenant's) raises ``NotFound``: starting from scratch on it
        would be a mistake, not a fresh start."""
        call = get(f"/api/v1/runs/{run_id}/checkpoints/latest")
        return Request(call, absent=NO_CHECKPOINT_TYPE)


class Obligations(Resource[M]):
    """Exactly-once work: open by key, commit once."""

    @endpoint
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
    ) -> Request[ObligationOpened]:
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
        return Request(call, _opened)

    @endpoint
    def get(self, obligation_id: str) -> Request[Obligation]:
        """One obligation."""
        return Request(get(f"/api/v1/obligations/{obligation_id}"))

    @endpoint
    def commit(
        self, obligation_id: str, *, result: Any, idempotency_key: str | None = None
    ) -> Request[Obligation]:
        """Commit the work's ``result``. Exactly once: a later or concurrent commit raises
        ``Conflict`` whose ``body`` is the committed obligation (with the winner's result)."""
        call = post(
            f"/api/v1/obligations/{obligation_id}/commit",
            {"result": result},
            idempotency_key=idempotency_key,
            ok=(200,),
        )
        return Request(call)

    @listing
    def list(
        self,
        *,
        task_id: str | None = None,
        state: str | None = None,
        overdue: bool | None = None,
        page_size: int | None = None,
    ) -> Page[Obligation]:
        """Every obligation (oldest first), filtered by task, state or being overdue."""
        params = query(task_id=task_id, state=state, overdue=overdue, page_size=page_size)
        return Page(get("/api/v1/obligations", params))


class Erasures(Resource[M]):
    """Erasure of everything about a subject, an owner or a consent."""

    @endpoint
    def create(
        self,
        *,
        reason: str,
        subject: str | None = None,
        owner: str | None = None,
        consent_ref: str | None = None,
        dry_run: bool | None = None,
        idempotency_key: str | None = None,
    ) -> Request[dict[str, Any]]:
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
        return Request(call)

    @endpoint
    def job(self, url: str) -> Request[dict[str, Any]]:
        """A large erasure's job (the ``url`` of ``create``'s ``202`` answer): state,
        progress and, when done, totals and receipt."""
        return Request(get(url))  # the client keeps a link on its own server


class Receipts(Resource[M]):
    """Deletion receipts (credentials with the ``audit`` action)."""

    @listing
    def list(
        self, *, parent: str | None = None, kind: str | None = None, page_size: int | None = None
    ) -> Page[DeletionReceipt]:
        """Every deletion receipt of the tenant, newest first; ``parent`` lists one
        erasure's receipts, ``kind`` one kind of receipt."""
        params = query(parent=parent, kind=kind, page_size=page_size)
        return Page(get("/api/v1/deletion-receipts", params))

    @endpoint
    def get(self, receipt_id: str) -> Request[DeletionReceipt]:
        """One deletion receipt."""
        return Request(get(f"/api/v1/deletion-receipts/{receipt_id}"))


class AuditEvents(Resource[M]):
    """The tenant's audit trail (credentials with the ``audit`` action)."""

    @listing
    def list(
        self,
        *,
        record: str | None = None,
        action: str | None = None,
        actor: str | None = None,
        since: str | None = None,
        page_size: int | None = None,
    ) -> Page[AuditEvent]:
        """Every matching audit event, page after page."""
        params = query(record=record, action=action, actor=actor, since=since, page_size=page_size)
        return Page(get("/api/v1/audit-events", params))


class PromotionRequests(Resource[M]):
    """The promotion queue (credentials with the ``review`` action): a record becomes
    confirmed when a reviewer approves it. A credential never approves a record it wrote."""

    @listing
    def list(
        self, *, state: str | None = None, page_size: int | None = None
    ) -> Page[PromotionRequest]:
        """Every promotion request (newest first), filtered by ``state`` (open, approved,
        rejected...), page after page."""
        return Page(get("/api/v1/promotion-requests", query(state=state, page_size=page_size)))

    @endpoint
    def approve(
        self, request_id: str, *, reason: str, idempotency_key: str | None = None
    ) -> Request[PromotionRequest]:
        """Approve: the record becomes confirmed. ``reason`` is kept with the decision."""
        return _decision(request_id, "approve", reason, idempotency_key)

    @endpoint
    def reject(
        self, request_id: str, *, reason: str, idempotency_key: str | None = None
    ) -> Request[PromotionRequest]:
        """Reject: the record stays provisional (and expires as such)."""
        return _decision(request_id, "reject", reason, idempotency_key)


class Conflicts(Resource[M]):
    """Contradicting values of one fact, waiting for review (``review`` action). A
    credential never resolves a conflict in which it wrote either version."""

    @listing
    def list(self, *, state: str | None = None, page_size: int | None = None) -> Page[Conflict]:
        """Every conflict (newest first), filtered by ``state`` (open, resolved), page after
        page."""
        return Page(get("/api/v1/conflicts", query(state=state, page_size=page_size)))

    @endpoint
    def resolve(
        self,
        conflict_id: str,
        *,
        resolution: Resolution,
        reason: str,
        value: Any = None,
        idempotency_key: str | None = None,
    ) -> Request[Conflict]:
        """Resolve: ``keep_current``, ``accept_new``, or ``corrected`` with the ``value``
        (an agent's correction is a new provisional version). The losing version becomes
        superseded, never deleted."""
        call = post(
            f"/api/v1/conflicts/{conflict_id}/resolve",
            body(resolution=resolution, reason=reason, value=value),
            idempotency_key=idempotency_key,
            ok=(200,),
        )
        return Request(call)


def _member(name: str) -> Callable[[int, Any], Any]:
    """Read one member of the answer (a listing answered whole inside an object)."""
    return lambda status, parsed: parsed[name]


def _opened(status: int, parsed: Any) -> ObligationOpened:
    opened = cast(ObligationOpened, parsed)
    opened["created"] = status == 201
    return opened


def _decision(
    request_id: str, decision: str, reason: str, idempotency_key: str | None
) -> Request[PromotionRequest]:
    call = post(
        f"/api/v1/promotion-requests/{request_id}/{decision}",
        {"reason": reason},
        idempotency_key=idempotency_key,
        ok=(200,),
    )
    return Request(call)
