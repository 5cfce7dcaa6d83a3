"""Typed shapes of the API's requests and responses (``TypedDict``: plain dicts at run time).

Responses are the server's JSON as-is, so fields a newer server adds are kept, not dropped.
``tests/clients/test_models.py`` checks each model against the server's OpenAPI schema.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

Sensitivity = Literal["public", "internal", "personal", "restricted"]
SourceKind = Literal["interaction", "tool_call", "document", "user_action", "derived"]
RetentionBasis = Literal["session", "consent", "contract", "indefinite"]
Purpose = Literal["context", "decision"]
ScopeMatch = Literal["contained", "exact"]
Resolution = Literal["keep_current", "accept_new", "corrected"]
Trust = Literal["provisional", "confirmed"]


# --- request parts -------------------------------------------------------------------------


class SourceInput(TypedDict):
    """Where a memory came from: ``kind`` and ``ref`` required."""

    kind: SourceKind
    ref: str
    turn_id: NotRequired[str]
    tool_call_id: NotRequired[str]
    run_id: NotRequired[str]


class ScopeInput(TypedDict):
    """Where a fact holds: ``domain`` required."""

    domain: str
    task_type: NotRequired[str]
    conditions: NotRequired[dict[str, Any]]


class RetentionInput(TypedDict):
    """How long it may be kept: ``basis`` required; ``consent`` needs ``consent_ref``."""

    basis: RetentionBasis
    ttl: NotRequired[str]
    consent_ref: NotRequired[str]


class RedactionInput(TypedDict, total=False):
    state: Literal["none", "applied", "required"]
    fields: list[str]


class FactRef(TypedDict):
    """A fact as an agent holds it in its context, for ``facts.check``."""

    id: str
    version: NotRequired[int]


class SummarySource(TypedDict):
    type: Literal["record", "episode"]
    id: str


# --- responses -----------------------------------------------------------------------------


class Source(TypedDict):
    kind: str
    ref: str
    turn_id: str
    tool_call_id: str
    run_id: str


class Scope(TypedDict):
    domain: str
    task_type: str
    conditions: Any


class Retention(TypedDict):
    basis: str
    ttl: str | None
    consent_ref: str


class Redaction(TypedDict):
    state: str
    fields: list[str]


class Actor(TypedDict):
    """Who did it: ``type`` is user, credential or system."""

    type: str
    id: str
    label: str


class Record(TypedDict):
    """A stored memory record."""

    id: str
    version: int
    key: str
    subject: str
    value: Any
    content: str
    source: Source
    observed_at: str
    written_at: str
    writer: dict[str, str]
    owner: str
    reason: str
    scope: Scope
    sensitivity: str
    retention: Retention
    redaction: Redaction
    trust: str
    status: str
    expires_at: str | None
    supersedes: str | None
    superseded_by: str | None
    superseded_at: str | None
    conflict: str | None


class RecordWritten(Record):
    """The answer to a write: the record and what the write did (``outcome``: created,
    conflict, observed or unchanged)."""

    outcome: str
    promotion_request: str | None
    notices: list[str]


class BatchItem(TypedDict):
    """One item's answer in a batch write: ``status`` is what a single write would have got;
    ``record`` with a 2xx, ``error`` (the problem) with a 4xx (``410`` on a retry: the record
    was deleted or expired since)."""

    index: int
    status: int
    record: NotRequired[RecordWritten]
    error: NotRequired[Problem]


class BatchResult(TypedDict):
    """The answer to a batch write: every item's, in order, and how many succeeded."""

    items: list[BatchItem]
    succeeded: int
    failed: int


class Version(TypedDict):
    """One version of a fact, in a record's history."""

    id: str
    version: int
    value: Any
    trust: str
    status: str
    written_at: str
    source: Source
    writer: dict[str, str]
    supersedes: str | None
    superseded_by: str | None
    superseded_at: str | None
    current_from: str | None
    current_until: str | None


class PromotionRequest(TypedDict):
    id: str
    record: str
    state: str
    evidence: Any
    reason: str
    requested_by: dict[str, str]
    requested_at: str
    decided_by: dict[str, str] | None
    decided_at: str | None
    decision_reason: str
    # The reviewer holding the request (their name) and until when; both None when no
    # claim is in force. Another's decision is refused (409) while it holds.
    claimed_by: str | None
    claimed_until: str | None


class Conflict(TypedDict):
    """Two values of one fact: the ``current`` record and the ``contender``; once resolved,
    the ``resolution``, the ``resolved_record`` and who resolved it, why."""

    id: str
    state: str
    subject: str
    key: str
    current: Record
    contender: Record
    opened_at: str
    resolution: str
    resolved_record: str | None
    resolver: dict[str, str] | None
    reason: str
    resolved_at: str | None
    # The person holding it in the console while a claim lasts (others' resolutions are a 409).
    claimed_by: str | None
    claimed_until: str | None


class ConfirmedBy(TypedDict):
    """Who confirmed a version: ``kind`` person (a reviewer), credential (an agent credential
    with the review action) or observation (a second independent observation; ``id`` is the
    observation's)."""

    kind: Literal["person", "credential", "observation"]
    id: str
    label: str
    at: str
    promotion_event: str


class Fact(TypedDict):
    """The current version of one scoped fact of a subject (``fact`` names the fact, ``id``
    the version). ``confirmed_by`` is None while it is provisional; ``in_conflict`` says an
    open conflict (``conflict``) contradicts it: not a value to act on irreversibly."""

    key: str
    id: str
    fact: str
    value: Any
    version: int
    trust: str
    observed_at: str
    written_at: str
    source: Source
    expires_at: str | None
    scope: Scope
    confirmed_by: ConfirmedBy | None
    conflict: str | None
    in_conflict: bool


class FactCheck(TypedDict):
    """Whether a fact held in context is still current; a stale one has a ``reason`` and,
    where there is one, the ``current_id``. ``safe_to_act``: current, in no open conflict
    and at least the trust asked for (default confirmed); ``unsafe_reasons`` says why not."""

    id: str
    version: int | None
    found: bool
    current: bool
    stale: bool
    status: str
    reason: NotRequired[str]
    current_id: NotRequired[str | None]
    current_version: NotRequired[int | None]
    deletion_receipt: NotRequired[str | None]
    detail: NotRequired[str | None]
    trust: Trust | None
    confirmed_by: ConfirmedBy | None
    conflict: str | None
    in_conflict: bool
    safe_to_act: bool
    unsafe_reasons: list[Literal["not_found", "stale", "in_conflict", "provisional"]]


class Why(TypedDict):
    """What ranked a hit: each leg's score (``vector``, the cosine similarity; ``text``, the
    BM25 score of its words) and rank (1 is best; None when not in that leg's list)."""

    vector: float | None
    text: float | None
    vector_rank: int | None
    text_rank: int | None


class HitSummary(TypedDict):
    id: str
    text: str
    reason: str
    sensitivity: str
    sources: list[SummarySource]
    created_at: str


class SearchHit(TypedDict):
    """One search result, the same keys for a record and a summary: ``type`` says which of
    ``record`` and ``summary`` is set (the other is None). A summary has no scope, trust or
    expiry of its own (None): it lives while its sources do."""

    type: Literal["record", "summary"]
    record: Record | None
    summary: HitSummary | None
    score: float
    why: Why
    scope: Scope | None
    trust: str | None
    confirmed_by: ConfirmedBy | None
    conflict: str | None
    in_conflict: bool
    expires_at: str | None
    source: dict[str, Any]
    provenance: dict[str, Any]


class Abstention(TypedDict):
    """Why a search returned no hits: ``nothing_in_scope``, ``only_provisional``,
    ``below_floor`` (with the nearest candidate's similarity and the floor) or
    ``nothing_matched``."""

    reason: Literal["nothing_in_scope", "only_provisional", "below_floor", "nothing_matched"]
    detail: str
    candidates: int
    best_similarity: float | None
    floor: float | None


class SearchResult(TypedDict):
    """The ranked hits, and how the search ran; with no hits, ``abstention`` says why (it is
    None when there are hits)."""

    results: list[SearchHit]
    abstention: Abstention | None
    purpose: Literal["context", "decision"]
    plan: str
    model: str


class Summary(TypedDict):
    id: str
    text: str
    valid: bool
    sources: list[Any]


class Run(TypedDict):
    """A run of a task: ``state`` open or closed."""

    id: str
    task_id: str
    owner: str
    subject: str | None
    state: str
    opened_at: str
    opened_by: Actor
    closed_at: str | None
    closed_by: Actor | None
    episodes_discarded: int
    records_expired: int


class Episode(TypedDict):
    id: str
    run: str
    seq: int
    role: str
    content: str
    content_ref: str
    created_at: str


class Checkpoint(TypedDict):
    id: str
    run: str
    step: int
    state: Any
    created_at: str


class Obligation(TypedDict):
    """A unit of exactly-once work: ``state`` pending, committed, failed or cancelled."""

    id: str
    task_id: str
    kind: str
    key: str
    subject: str | None
    state: str
    depends_on: list[str]
    deadline: str | None
    overdue: bool
    payload: Any
    result: Any
    created_at: str
    created_by: Actor
    committed_at: str | None
    committed_by: Actor | None
    ended_at: str | None
    ended_by: Actor | None
    end_reason: str


class ObligationOpened(Obligation):
    """The answer to opening an obligation. ``created`` is set by the client: ``False``
    when the key already existed (the existing obligation, with ``mismatched`` naming the
    request fields that differ from it)."""

    mismatched: list[str]
    created: NotRequired[bool]


class DeletionReceipt(TypedDict):
    """What a deletion or erasure removed (the server documents every field)."""

    id: NotRequired[str]
    dry_run: NotRequired[bool]


class AuditEvent(TypedDict):
    id: str
    seq: int
    occurred_at: str
    action: str
    actor: dict[str, str]
    object: dict[str, str]
    digest: str
    data: Any
    prev_hash: str
    hash: str


class Problem(TypedDict):
    """RFC 9457 problem details, the body of every error answer."""

    type: str
    title: str
    status: int
    detail: str
    errors: NotRequired[dict[str, list[str]]]


# Model -> the OpenAPI component it mirrors (checked by the client's schema test).
SCHEMA_COMPONENTS: dict[str, type] = {
    "Source": Source,
    "Scope": Scope,
    "Retention": Retention,
    "Redaction": Redaction,
    "ActorOutput": Actor,
    "Record": Record,
    "RecordWriteResponse": RecordWritten,
    "BatchItemResult": BatchItem,
    "RecordBatchResponse": BatchResult,
    "Version": Version,
    "PromotionRequest": PromotionRequest,
    "Conflict": Conflict,
    "Fact": Fact,
    "ConfirmedBy": ConfirmedBy,
    "FactCheckResult": FactCheck,
    "Run": Run,
    "Episode": Episode,
    "Checkpoint": Checkpoint,
    "Obligation": Obligation,
    "ObligationCreateResponse": ObligationOpened,
    "AuditEvent": AuditEvent,
    "Problem": Problem,
    "SearchHit": SearchHit,
    "HitSummary": HitSummary,
    "Why": Why,
    "SearchResponse": SearchResult,
    "SourceInput": SourceInput,
    "ScopeInput": ScopeInput,
    "RetentionInput": RetentionInput,
    "RedactionInput": RedactionInput,
    "FactCheckItem": FactRef,
    "SummarySourceInput": SummarySource,
}
