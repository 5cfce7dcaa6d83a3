"""Running a scenario set through the record (the product) and the cache, side by side.

Both configurations see the same scenarios, in the same run, embedded by the same model:

* **record**: the product, in a sandbox tenant (:mod:`apps.evaluation.sandbox`), driven only
  through its API by the sandbox's agents: memories are written, observed by an independent
  source, confirmed by a reviewer, superseded through a reviewed conflict, deleted, erased,
  expired (by lifetime, revoked consent or a closed run) as each scenario says; queued
  embedding work is done as the worker does it; then each decision searches with the
  purpose its decision has (``decision`` when irreversible, ``context`` otherwise), in its
  scope, for its subject.
* **cache**: :class:`apps.evaluation.cache.NearestNeighbourCache`, given the same writes and
  removals as a cache takes them.

Then canaries are written, summarised, embedded and removed, and every place an agent or an
operator can read is probed for their tokens; and the decisions whose memories the scenarios
change afterwards are replayed through ``GET /api/v1/evaluation/decisions-at-risk``.
"""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any
from urllib.parse import parse_qs, urlsplit

from django.db.models import TextField
from django.db.models.functions import Cast
from django.utils.dateparse import parse_datetime

from apps.api.models import IdempotencyKey
from apps.audit.models import AuditEvent
from apps.derivations.embedders import get_embedder
from apps.derivations.embeddings import record_embed, summary_embed
from apps.derivations.models import Embedding, Summary
from apps.records.models import MemoryRecord
from apps.records.purge import records_compact_expired
from apps.records.redaction import REDACTION_MARKER
from apps.records.validation import ttl_parse
from apps.state.models import Checkpoint, Episode, Obligation
from apps.work.models import OutboxMessage, OutboxState
from apps.work.outbox import EMBED_RECORD, EMBED_SUMMARY, outbox_finish

from .cache import CacheItem, NearestNeighbourCache
from .metrics import (
    CanaryRun,
    DecisionRun,
    Retrieved,
    at_risk_figures,
    decision_figures,
    residue_figures,
    thresholds_check,
    thresholds_effective,
)
from .sandbox import ApiAgent, EvaluationFailed, ProgressCallback, Sandbox, TenantPolicy, in_sandbox
from .scenarios import Canary, MemorySpec, Scenario, ScenarioSet
from .store import NamespacedStore

EXPIRY_REMOVALS = frozenset({"expire_ttl", "revoke_consent", "close_run"})
REVIEW_REASON = "confirmed by the evaluation's reviewer"
BASELINES = ("store", "cache")
# The relevance floors of the sweep (precision against abstention), around e5-small's 0.85.
SWEEP_FLOORS = (0.75, 0.8, 0.825, 0.85, 0.875, 0.9)
SWEEP_FIGURES = (
    "decision_accuracy",
    "recall_precision",
    "recall_at_k",
    "abstention_rate",
    "missed_rate",
    "wrong_rate",
)


@dataclass(frozen=True)
class RecordSettings:
    """How the evaluation's agent uses the product. The defaults are the product as designed;
    each other value breaks one guarantee on purpose, to show the gates notice:
    ``min_similarity`` overrides the model's relevance floor, ``scope_filter=False`` searches
    without the decision's scope, ``confirmed_for_decisions=False`` takes every decision with
    ``purpose: "context"`` (provisional memories included)."""

    min_similarity: float | None = None
    scope_filter: bool = True
    confirmed_for_decisions: bool = True

    @property
    def is_default(self) -> bool:
        return self == RecordSettings()


def _when(raw: Any) -> str:
    """A timestamp as one comparable text (UTC, ISO 8601), whichever way it was written."""
    parsed = parse_datetime(str(raw)) if raw else None
    return parsed.astimezone(UTC).isoformat() if parsed else str(raw or "")


def _observed_now() -> str:
    return _timestamp(datetime.now(UTC))


def _timestamp(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _moment(raw: str) -> datetime | None:
    """A scenario's timestamp with its zone; None for one the API would refuse anyway."""
    parsed = parse_datetime(raw)
    return parsed if parsed is not None and parsed.tzinfo is not None else None


def _retrieved(scenario: Scenario, ref: str, key: str, value: Any, observed_at: Any) -> Retrieved:
    """What a configuration returned, by its memory's id in the scenario that wrote it
    (``ref``: "scenario/memory"), or "" for anything else."""
    scenario_id, _, memory_id = ref.partition("/")
    memory = memory_id if scenario_id == scenario.id else ""
    return Retrieved(memory=memory, key=key, value=value, observed_at=_when(observed_at))


def _ttl_seconds(retention: dict[str, Any]) -> float:
    raw = retention.get("ttl")
    ttl = ttl_parse(raw)[0] if isinstance(raw, str) else None
    return ttl.total_seconds() if ttl is not None else 0.0


@dataclass
class RecordConfiguration:
    """The product, through its API, in the sandbox."""

    sandbox: Sandbox
    settings: RecordSettings = field(default_factory=RecordSettings)
    record_ids: dict[str, str] = field(default_factory=dict)  # "scenario/memory" -> record id
    by_record: dict[str, str] = field(default_factory=dict)  # record id -> "scenario/memory"
    runs: dict[str, str] = field(default_factory=dict)  # scenario or canary id -> run id
    expiry_deadline: float = 0.0  # monotonic time by which every TTL memory has expired
    # scenario id -> how far its observations move forward: a record's lifetime counts from
    # observed_at, so the set's fixed dates would be long expired. Each scenario's latest
    # observation becomes the time it is written; the order within a scenario stays.
    observed_shift: dict[str, timedelta] = field(default_factory=dict)

    @property
    def writer(self) -> ApiAgent:
        return self.sandbox.writer

    # --- writing the scenarios ------------------------------------------------------------

    def _run_for(self, owner_id: str, subject: str, *, with_subject: bool = False) -> str:
        if owner_id not in self.runs:
            body: dict[str, Any] = {"task_id": f"evaluation:{owner_id}", "owner": subject}
            if with_subject:
                body["subject"] = subject
            self.runs[owner_id] = self.writer.call("POST", "runs", body)["id"]
        return self.runs[owner_id]

    def _write_body(
        self, scenario_id: str, subject: str, memory: MemorySpec, source_ref: str
    ) -> dict[str, Any]:
        source: dict[str, Any] = {"kind": "interaction", "ref": source_ref}
        retention = dict(memory.retention)
        if retention.get("basis") == "session":
            source["run_id"] = self._run_for(scenario_id, subject)
        ttl = _ttl_seconds(retention)
        if ttl and ttl < 60:
            self.expiry_deadline = max(self.expiry_deadline, time.monotonic() + ttl)
            observed_at = _observed_now()  # to expire during the run, not before its write
        else:
            moment = _moment(memory.observed_at)
            shift = self.observed_shift.get(scenario_id, timedelta(0))
            observed_at = _timestamp(moment + shift) if moment else memory.observed_at
        return {
            "key": memory.key,
            "subject": subject,
            "value": memory.value,
            "content": memory.content,
            "source": source,
            "observed_at": observed_at,
            "owner": subject,
            "reason": f"evaluation scenario {scenario_id}",
            "scope": memory.scope,
            "sensitivity": memory.sensitivity,
            "retention": retention,
        }

    def _confirm(self, body: dict[str, Any], record_id: str) -> None:
        """An independent source observes the same value; a reviewer approves the promotion
        request it opens (unless the tenant promotes on a second observation)."""
        observed = self.sandbox.observer.call(
            "POST",
            "records",
            {**body, "source": {**body["source"], "ref": body["source"]["ref"] + ":seen"}},
        )
        if observed["id"] != record_id:
            raise EvaluationFailed(f"the second observation of {record_id} wrote another version")
        if observed["trust"] == "confirmed":
            return
        request_id = observed.get("promotion_request")
        if not request_id:
            raise EvaluationFailed(
                f"the second observation of {record_id} opened no promotion request"
            )
        self.sandbox.reviewer.call(
            "POST", f"promotion-requests/{request_id}/approve", {"reason": REVIEW_REASON}
        )

    def _conflict(self, written: dict[str, Any], what: str, *, resolve: bool) -> None:
        """The conflict a newer value opened; with ``resolve``, the reviewer accepts it."""
        if not written.get("conflict"):
            raise EvaluationFailed(f"{what} opened no conflict")
        if resolve:
            self.sandbox.reviewer.call(
                "POST",
                f"conflicts/{written['conflict']}/resolve",
                {"resolution": "accept_new", "reason": "the newer value holds"},
            )

    def write_scenario(self, scenario: Scenario) -> None:
        now = datetime.now(UTC)
        moments = [_moment(m.observed_at) for m in scenario.memories]
        self.observed_shift[scenario.id] = now - max((m for m in moments if m), default=now)
        for memory in scenario.memories:
            body = self._write_body(
                scenario.id, scenario.subject, memory, f"interaction:{scenario.id}:{memory.id}"
            )
            written = self.writer.call("POST", "records", body)
            record_id, ref = written["id"], f"{scenario.id}/{memory.id}"
            self.record_ids[ref], self.by_record[record_id] = record_id, ref
            if memory.replaces or memory.contends:
                what = f"{scenario.id}/{memory.id}"
                self._conflict(written, what, resolve=bool(memory.replaces))
            if memory.trust == "confirmed":
                self._confirm(body, record_id)
        for memory in scenario.memories:
            record_id = self.record_ids[f"{scenario.id}/{memory.id}"]
            if memory.fate == "delete":
                forget = {"reason": "asked to forget"}
                self.writer.call("DELETE", f"records/{record_id}", params=forget)
            elif memory.fate == "redact":
                redaction = {"fields": [""], "reason": "asked to redact"}
                self.writer.call("POST", f"records/{record_id}/redact", redaction)
            elif memory.fate == "revoke_consent":
                ref = memory.retention["consent_ref"]
                self.writer.call("POST", f"consents/{ref}/revoke", {"reason": "consent withdrawn"})
        if any(m.fate == "erase" for m in scenario.memories):
            self.writer.call(
                "POST", "erasures", {"subject": scenario.subject, "reason": "right to erasure"}
            )
        if scenario.id in self.runs:
            self.writer.call("POST", f"runs/{self.runs[scenario.id]}/close")

    # --- the work of the worker and of beat -----------------------------------------------

    def drain_embeddings(self) -> int:
        """Do the queued embedding work as the worker does it (the same task bodies)."""
        done = 0
        with self.sandbox.scope():
            pending = OutboxMessage.objects.filter(
                state__in=[OutboxState.PENDING, OutboxState.PUBLISHED],
                task_name__in=[EMBED_RECORD, EMBED_SUMMARY],
            ).order_by("created_at")
            for message in list(pending):
                if message.task_name == EMBED_RECORD:
                    record_embed(message.payload.get("record_id"))
                else:
                    summary_embed(message.payload.get("summary_id"))
                outbox_finish(message.pk)
                done += 1
        return done

    def wait_for_expiry(self) -> None:
        """Let every memory written with a lifetime of seconds reach it (expiry is read time)."""
        remaining = self.expiry_deadline - time.monotonic()
        if remaining > 0:
            time.sleep(remaining + 0.05)

    def sweep_expired(self) -> int:
        """The expiry sweep beat runs every 15 minutes, now."""
        with self.sandbox.scope():
            return records_compact_expired()

    # --- deciding -------------------------------------------------------------------------

    def retrieve(
        self, scenario: Scenario, *, min_similarity: float | None = None
    ) -> tuple[Retrieved, ...]:
        decision, settings = scenario.decision, self.settings
        confirmed_only = decision.irreversible and settings.confirmed_for_decisions
        body: dict[str, Any] = {
            "query": decision.query,
            "purpose": "decision" if confirmed_only else "context",
            "top_k": decision.top_k,
            "subject": scenario.subject,
        }
        if settings.scope_filter:
            body["scope"] = decision.scope
        floor = settings.min_similarity if min_similarity is None else min_similarity
        if floor is not None:
            body["min_similarity"] = floor
        records = [
            hit.get("record") or {} for hit in self.writer.call("POST", "search", body)["results"]
        ]
        return tuple(
            _retrieved(
                scenario,
                self.by_record.get(str(r.get("id", "")), ""),
                str(r.get("key", "")),
                r.get("value"),
                r.get("observed_at"),
            )
            for r in records
        )

    # --- later changes and their replay ---------------------------------------------------

    def change_later(self, scenario: Scenario) -> None:
        after = scenario.after
        assert after is not None
        memory = scenario.memory(after.memory)
        record_id = self.record_ids[f"{scenario.id}/{memory.id}"]
        reason = {"reason": "changed after the decision"}
        if after.change in {"superseded", "in_conflict"}:
            body = self._write_body(
                scenario.id, scenario.subject, memory, f"interaction:{scenario.id}:later"
            )
            written = self.writer.call("POST", "records", {**body, "value": after.value})
            what = f"{scenario.id}: the later value"
            self._conflict(written, what, resolve=after.change == "superseded")
        elif after.change == "deleted":
            self.writer.call("DELETE", f"records/{record_id}", params=reason)
        elif after.change == "redacted":
            redaction = {"fields": list(after.fields) or [""], **reason}
            self.writer.call("POST", f"records/{record_id}/redact", redaction)
        elif after.change == "expired":
            self.writer.call("POST", f"consents/{memory.retention['consent_ref']}/revoke", reason)

    def decisions_at_risk(self) -> set[tuple[str, str]]:
        """Every (memory, change) the decisions-at-risk listing names, over all its pages."""
        found: set[tuple[str, str]] = set()
        params: dict[str, Any] = {"page_size": 200}
        while True:
            page = self.writer.call("GET", "evaluation/decisions-at-risk", params=params)
            for item in page["results"]:
                ref = self.by_record.get(str(item["memory"]["id"]), "")
                for change in item["changes"]:
                    found.add((ref or item["memory"]["id"], change["kind"]))
            if not page.get("next"):
                return found
            cursor = parse_qs(urlsplit(page["next"]).query)["cursor"][0]
            params = {"page_size": 200, "cursor": cursor}


@dataclass
class CacheConfiguration:
    cache: NearestNeighbourCache
    by_item: dict[str, str] = field(default_factory=dict)  # item id -> "scenario/memory"

    def write_scenario(self, scenario: Scenario) -> None:
        items = {}
        for memory in scenario.memories:
            items[memory.id] = self.cache.write(
                subject=scenario.subject,
                key=memory.key,
                value=memory.value,
                content=memory.content,
                observed_at=memory.observed_at,
            )
            self.by_item[items[memory.id]] = f"{scenario.id}/{memory.id}"
        for memory in scenario.memories:
            if memory.fate == "delete":
                self.cache.delete(items[memory.id])
            elif memory.fate == "redact":
                self.cache.redact(items[memory.id])
        if any(m.fate == "erase" for m in scenario.memories):
            self.cache.erase_subject(scenario.subject)
        # A cache has no versions, conflicts, trust or expiry: the rest leaves it as it is.

    def retrieve(self, scenario: Scenario) -> tuple[Retrieved, ...]:
        found = self.cache.search(
            query=scenario.decision.query, subject=scenario.subject, top_k=scenario.decision.top_k
        )
        return tuple(
            _retrieved(scenario, self.by_item.get(i.id, ""), i.key, i.value, i.observed_at)
            for i in found
        )


@dataclass
class StoreConfiguration:
    """The fair baseline (:class:`apps.evaluation.store.NamespacedStore`), given the same writes
    and removals as an application on LangGraph's store makes them."""

    store: NamespacedStore
    holder: dict[tuple[tuple[str, str], str], str] = field(default_factory=dict)

    def write_scenario(self, scenario: Scenario) -> None:
        session = f"session:{scenario.id}"
        for memory in scenario.memories:
            namespace = (scenario.subject, str(memory.scope.get("domain", "")))
            retention = memory.retention
            self.store.put(
                namespace=namespace,
                key=memory.key,
                value=memory.value,
                content=memory.content,
                observed_at=memory.observed_at,
                ttl_seconds=_ttl_seconds(retention) or None,
                consent_ref=str(retention.get("consent_ref", "")),
                session=session if retention.get("basis") == "session" else "",
            )
            # Which scenario memory the item now holds: a write of the same key replaced it.
            self.holder[(namespace, memory.key)] = f"{scenario.id}/{memory.id}"
        for memory in scenario.memories:
            namespace = (scenario.subject, str(memory.scope.get("domain", "")))
            holds = self.holder.get((namespace, memory.key)) == f"{scenario.id}/{memory.id}"
            if memory.fate == "delete" and holds:
                self.store.delete(namespace, memory.key)
            elif memory.fate == "redact" and holds:
                self.store.redact(namespace, memory.key, marker=REDACTION_MARKER)
            elif memory.fate == "revoke_consent":
                self.store.revoke_consent(str(memory.retention["consent_ref"]))
        if any(m.fate == "erase" for m in scenario.memories):
            self.store.erase_subject(scenario.subject)
        if any(m.retention.get("basis") == "session" for m in scenario.memories):
            self.store.close_session(session)

    def retrieve(self, scenario: Scenario) -> tuple[Retrieved, ...]:
        namespace = (scenario.subject, str(scenario.decision.scope.get("domain", "")))
        found = self.store.search(
            namespace=namespace, query=scenario.decision.query, limit=scenario.decision.top_k
        )
        return tuple(
            _retrieved(
                scenario, self.holder.get((namespace, i.key), ""), i.key, i.value, i.observed_at
            )
            for i in found
        )


# --- canaries ---------------------------------------------------------------------------------


@dataclass
class RecordCanary:
    canary: Canary
    record_id: str = ""
    summary_id: str = ""
    run_id: str = ""
    obligation_id: str = ""
    write_body: dict[str, Any] = field(default_factory=dict)
    summary_body: dict[str, Any] = field(default_factory=dict)
    embedding_digests: list[str] = field(default_factory=list)


class RecordCanaries:
    """Canaries in the product: written through the API (with Idempotency-Keys, so stored
    responses exist), summarised, embedded, with run traces where the removal reaches runs;
    removed; then looked for everywhere."""

    def __init__(self, configuration: RecordConfiguration) -> None:
        self.configuration = configuration
        self.items: list[RecordCanary] = []

    @property
    def writer(self) -> ApiAgent:
        return self.configuration.writer

    def write(self, canary: Canary) -> RecordCanary:
        item = RecordCanary(canary)
        source: dict[str, Any] = {"kind": "interaction", "ref": f"interaction:{canary.id}"}
        retention: dict[str, Any] = {"basis": "contract", "ttl": "P30D"}
        episode_id = ""
        if canary.removal in {"erase", "close_run"}:
            item.run_id = self.configuration._run_for(canary.id, canary.subject, with_subject=True)
            episode_id = self.writer.call(
                "POST", f"runs/{item.run_id}/episodes", {"role": "user", "content": canary.episode}
            )["id"]
        if canary.removal == "erase":
            # An erasure reaches the subject's runs (checkpoints) and obligations (payloads);
            # a run's close keeps its checkpoints and obligations, its ledger, by design.
            note = {"note": canary.token}
            self.writer.call("POST", f"runs/{item.run_id}/checkpoints", {"step": 1, "state": note})
            obligation = {
                "task_id": f"evaluation:{canary.id}",
                "kind": "notify",
                "key": f"{canary.id}:notify",
                "payload": note,
                "subject": canary.subject,
            }
            item.obligation_id = self.writer.call("POST", "obligations", obligation)["id"]
        if canary.removal == "close_run":
            retention = {"basis": "session"}
            source["run_id"] = item.run_id
        elif canary.removal == "revoke_consent":
            retention = {"basis": "consent", "ttl": "P30D", "consent_ref": f"consent:{canary.id}"}
        elif canary.removal == "expire_ttl":
            retention = {"basis": "contract", "ttl": "PT2S"}
            deadline = max(self.configuration.expiry_deadline, time.monotonic() + 2)
            self.configuration.expiry_deadline = deadline
        item.write_body = {
            "key": canary.key,
            "subject": canary.subject,
            "value": canary.value,
            "content": canary.content,
            "source": source,
            "observed_at": _observed_now(),
            "owner": canary.subject,
            "reason": f"evaluation canary {canary.id}",
            "scope": canary.scope,
            "sensitivity": canary.sensitivity,
            "retention": retention,
        }
        item.record_id = self.writer.call(
            "POST", "records", item.write_body, key=f"{canary.id}:write"
        )["id"]
        sources = [{"type": "record", "id": item.record_id}]
        if episode_id:
            sources.append({"type": "episode", "id": episode_id})
        item.summary_body = {"text": canary.summary, "sources": sources, "reason": "canary"}
        item.summary_id = self.writer.call(
            "POST", "summaries", item.summary_body, key=f"{canary.id}:summary"
        )["id"]
        self.items.append(item)
        return item

    def note_embeddings(self) -> None:
        """What each canary was embedded as, to tell a vector of its content from a later one
        of its redacted text."""
        with self.configuration.sandbox.scope():
            for item in self.items:
                vectors = Embedding.objects.filter(record_id=uuid.UUID(item.record_id))
                item.embedding_digests = list(vectors.values_list("content_digest", flat=True))

    def remove(self, item: RecordCanary) -> None:
        canary, reason = item.canary, {"reason": "canary removed"}
        if canary.removal == "delete":
            self.writer.call("DELETE", f"records/{item.record_id}", params=reason)
        elif canary.removal == "erase":
            self.writer.call("POST", "erasures", {"subject": canary.subject, **reason})
        elif canary.removal == "redact":
            self.writer.call(
                "POST", f"records/{item.record_id}/redact", {"fields": ["note"], **reason}
            )
        elif canary.removal == "revoke_consent":
            self.writer.call("POST", f"consents/consent:{canary.id}/revoke", reason)
        elif canary.removal == "close_run":
            self.writer.call("POST", f"runs/{item.run_id}/close")
        # expire_ttl: its lifetime ends by itself.

    def probe_reads(self, item: RecordCanary) -> dict[str, bool]:
        """Every read an agent can make of it, through the API."""
        canary, token = item.canary, item.canary.token
        subject = {"subject": canary.subject}
        read = self.writer.request
        calls = {
            "record": partial(read, "GET", f"records/{item.record_id}"),
            "history": partial(read, "GET", f"records/{item.record_id}/history"),
            "records_list": partial(read, "GET", "records", params=subject),
            "facts": partial(read, "GET", "facts", params=subject),
            "search_text": partial(read, "POST", "search", {"query": token, "top_k": 100}),
            "summary": partial(read, "GET", f"summaries/{item.summary_id}"),
            # A retry of the original requests, as a client would send it.
            "write_retry": partial(
                read, "POST", "records", item.write_body, key=f"{canary.id}:write"
            ),
            "summary_retry": partial(
                read, "POST", "summaries", item.summary_body, key=f"{canary.id}:summary"
            ),
        }
        embedder = get_embedder(self.configuration.sandbox.tenant.embedding_model)
        if embedder.computes:
            vector = [float(x) for x in embedder.embed([canary.content])[0]]
            body = {"vector": vector, "min_similarity": 0, "top_k": 100}
            calls["search_vector"] = partial(read, "POST", "search", body)
        if item.run_id:
            calls["episodes"] = partial(read, "GET", f"runs/{item.run_id}/episodes")
        if item.obligation_id:
            calls["checkpoint"] = partial(read, "GET", f"runs/{item.run_id}/checkpoints/latest")
            calls["obligation"] = partial(read, "GET", f"obligations/{item.obligation_id}")
        return {place: token in call()[1] for place, call in calls.items()}

    def probe_stored(self, item: RecordCanary) -> dict[str, bool]:
        """Every table an operator can read (the admin, the database): rows holding the token,
        and vectors computed from the canary's content."""
        token = item.canary.token

        def holds(model: Any, *columns: str) -> bool:
            for column in columns:
                annotated = model.objects.annotate(_text=Cast(column, TextField()))
                if annotated.filter(_text__contains=token).exists():
                    return True
            return False

        with self.configuration.sandbox.scope():
            vectors = Embedding.objects.filter(record_id=uuid.UUID(item.record_id))
            return {
                "records_table": holds(MemoryRecord, "content", "value"),
                "record_vectors": vectors.filter(
                    content_digest__in=item.embedding_digests
                ).exists(),
                "summary_vectors": Embedding.objects.filter(summary_id=item.summary_id).exists(),
                "summaries_table": holds(Summary, "text"),
                "stored_responses": holds(IdempotencyKey, "response_body"),
                "audit_events": holds(AuditEvent, "data"),
                "outbox": holds(OutboxMessage, "payload"),
                "episodes_table": holds(Episode, "content"),
                "checkpoints_table": holds(Checkpoint, "state"),
                "obligations_table": holds(Obligation, "payload", "result"),
            }


class CacheCanaries:
    """The same canaries in the cache, removed as a cache removes them."""

    def __init__(self, cache: NearestNeighbourCache) -> None:
        self.cache = cache
        self.items: dict[str, tuple[str, str]] = {}  # canary id -> (item, summary)

    def write(self, canary: Canary) -> None:
        item = self.cache.write(
            subject=canary.subject,
            key=canary.key,
            value=canary.value,
            content=canary.content,
            observed_at="2025-01-06T09:00:00Z",
        )
        summary = self.cache.summarise(text=canary.summary, sources=[item])
        self.items[canary.id] = (item, summary)

    def remove(self, canary: Canary) -> None:
        item, _summary = self.items[canary.id]
        if canary.removal == "delete":
            self.cache.delete(item)
        elif canary.removal == "erase":
            self.cache.erase_subject(canary.subject)
        elif canary.removal == "redact":
            self.cache.redact(item)
        # A cache keeps what expired: it has no lifetimes, consents or runs.

    def probe(self, canary: Canary) -> dict[str, bool]:
        item, summary = self.items[canary.id]
        token = canary.token
        row = self.cache.read(item)

        def holds(rows: list[CacheItem]) -> bool:
            return any(token in json.dumps([r.value, r.content]) for r in rows)

        return {
            "record": holds([row] if row is not None else []),
            "records_list": holds(self.cache.list_subject(canary.subject)),
            "search_vector": holds(
                self.cache.search(query=canary.content, subject=None, top_k=100)
            ),
            "summary": token in self.cache.summaries[summary].text,
        }


def _canary_run(
    canary: Canary,
    probes: list[dict[str, bool]],
    stored_later: dict[str, bool] | None = None,
    awaiting: dict[str, bool] | None = None,
) -> CanaryRun:
    probed: dict[str, bool] = {}
    for found in probes:
        for place, hit in found.items():
            probed[place] = probed.get(place, False) or hit
    if stored_later is not None:
        probed.update(stored_later)
    return CanaryRun(
        canary=canary.id,
        removal=canary.removal,
        probed=tuple(probed),
        residues=tuple(place for place, hit in probed.items() if hit),
        awaiting_sweep=tuple(
            place for place, hit in (awaiting or {}).items() if hit and not probed.get(place)
        ),
    )


# --- the whole run ------------------------------------------------------------------------------


def _steps(scenario_set: ScenarioSet, *, baselines: tuple[str, ...], sweep: bool) -> int:
    replays = sum(1 for s in scenario_set.scenarios if s.after is not None)
    decisions = len(scenario_set.scenarios)
    return (
        decisions * 2 * (len(baselines) + 1)  # written and decided in each configuration
        + len(scenario_set.canaries) * 2
        + replays
        + (len(SWEEP_FLOORS) if sweep else 0)
        + 2
    )


def _sweep(record: RecordConfiguration, scenarios: list[Scenario]) -> list[dict[str, Any]]:
    """The record's decisions again at each relevance floor of ``SWEEP_FLOORS``: precision
    against abstention (the held-out half, or the whole set when it has no halves)."""
    points = []
    for floor in SWEEP_FLOORS:
        runs = [DecisionRun(s, record.retrieve(s, min_similarity=floor)) for s in scenarios]
        figures = decision_figures(runs)
        points.append({"floor": floor, **{name: figures[name] for name in SWEEP_FIGURES}})
    return points


def evaluate_in_sandbox(
    sandbox: Sandbox,
    progress: ProgressCallback,
    *,
    scenario_set: ScenarioSet,
    against: tuple[str, ...] = ("cache",),
    settings: RecordSettings | None = None,
    sweep: bool = False,
    keep_runs: bool = False,
) -> dict[str, Any]:
    """Run ``scenario_set`` in ``sandbox`` and through each baseline of ``against`` (``store``,
    ``cache``); the figures of each. With ``keep_runs``, ``_runs`` holds every configuration's
    decisions (for figures pooled over several sets; not JSON)."""
    started = time.monotonic()
    baselines = tuple(name for name in BASELINES if name in against)
    total = _steps(scenario_set, baselines=baselines, sweep=sweep)
    done = 0
    phases: dict[str, float] = {}
    mark = [time.monotonic()]

    def step(phase: str, count: int = 1) -> None:
        nonlocal done
        done += count
        now = time.monotonic()
        phases[phase] = phases.get(phase, 0.0) + now - mark[0]
        mark[0] = now
        progress(phase, done, total)

    record = RecordConfiguration(sandbox, settings or RecordSettings())
    embedder = get_embedder(sandbox.tenant.embedding_model)
    cache = CacheConfiguration(NearestNeighbourCache(embedder)) if "cache" in baselines else None
    store = StoreConfiguration(NamespacedStore(embedder)) if "store" in baselines else None
    configurations: dict[str, RecordConfiguration | CacheConfiguration | StoreConfiguration] = {
        name: configuration
        for name, configuration in (("record", record), ("store", store), ("cache", cache))
        if configuration is not None
    }

    for name, configuration in configurations.items():
        for scenario in scenario_set.scenarios:
            configuration.write_scenario(scenario)
            step(f"writing the scenarios' memories ({name})")
    record_canaries = RecordCanaries(record)
    cache_canaries = CacheCanaries(cache.cache) if cache is not None else None
    for canary in scenario_set.canaries:
        record_canaries.write(canary)
        if cache_canaries is not None:
            cache_canaries.write(canary)
    record.drain_embeddings()
    if cache is not None:
        cache.cache.embed_pending()
    record_canaries.note_embeddings()
    for item in record_canaries.items:
        record_canaries.remove(item)
        if cache_canaries is not None:
            cache_canaries.remove(item.canary)
        step("removing the canaries")
    record.drain_embeddings()
    record.wait_for_expiry()
    step("embedding, as the worker does")

    runs: dict[str, list[DecisionRun]] = {}
    for name, configuration in configurations.items():
        runs[name] = []
        for scenario in scenario_set.scenarios:
            runs[name].append(DecisionRun(scenario, configuration.retrieve(scenario)))
            step(f"deciding ({name})")

    # Residue: every read right after the removal; stored rows too, except for an expiry,
    # whose rows go at the next sweep (reads hide them from the moment it expires).
    first_reads = {i.canary.id: record_canaries.probe_reads(i) for i in record_canaries.items}
    first_stored = {i.canary.id: record_canaries.probe_stored(i) for i in record_canaries.items}
    if record_canaries.items:
        record.sweep_expired()
    step("sweeping what expired, as beat does")
    record_canary_runs = []
    for item in record_canaries.items:
        canary = item.canary
        if canary.removal in EXPIRY_REMOVALS:
            run = _canary_run(
                canary,
                [first_reads[canary.id], record_canaries.probe_reads(item)],
                stored_later=record_canaries.probe_stored(item),
                awaiting=first_stored[canary.id],
            )
        else:
            run = _canary_run(canary, [first_reads[canary.id], first_stored[canary.id]])
        record_canary_runs.append(run)
        step("probing every place for the canaries")
    cache_canary_runs = (
        [_canary_run(c, [cache_canaries.probe(c)]) for c in scenario_set.canaries]
        if cache_canaries is not None
        else []
    )

    # A decision is at risk when a memory it was given changed since: the listing must name
    # each later change to a memory the record returned for its decision.
    expected: set[tuple[str, str]] = set()
    returned = {(run.scenario.id, item.memory) for run in runs["record"] for item in run.retrieved}
    for scenario in scenario_set.scenarios:
        if scenario.after is not None:
            record.change_later(scenario)
            if (scenario.id, scenario.after.memory) in returned:
                expected.add((f"{scenario.id}/{scenario.after.memory}", scenario.after.change))
            step("changing memories after their decisions")
    changed = any(s.after is not None for s in scenario_set.scenarios)
    found = record.decisions_at_risk() if changed else set()

    results: dict[str, Any] = {
        "record": {
            "decisions": decision_figures(runs["record"]),
            "residue": residue_figures(record_canary_runs),
            "at_risk": at_risk_figures(expected, found) if changed else {},
        },
    }
    if record.settings != RecordSettings():
        results["record"]["settings"] = dataclasses.asdict(record.settings)
    if sweep:
        held_out = [s for s in scenario_set.scenarios if s.half in {"", "held_out"}]
        results["record"]["floor_sweep"] = _sweep(record, held_out)
        step("sweeping the relevance floor (record)", len(SWEEP_FLOORS))
    if store is not None:
        results["store"] = {"decisions": decision_figures(runs["store"])}
    if cache is not None:
        results["cache"] = {
            "decisions": decision_figures(runs["cache"]),
            "residue": residue_figures(cache_canary_runs),
        }
    results["seconds"] = round(time.monotonic() - started, 1)
    results["phase_seconds"] = {phase: round(seconds, 1) for phase, seconds in phases.items()}
    if keep_runs:
        results["_runs"] = runs
    return results


def evaluate(
    scenario_set: ScenarioSet,
    *,
    policy: TenantPolicy | None = None,
    against_cache: bool = True,
    against: tuple[str, ...] | None = None,
    settings: RecordSettings | None = None,
    sweep: bool = False,
    progress: ProgressCallback | None = None,
    keep_runs: bool = False,
) -> dict[str, Any]:
    """Run ``scenario_set`` in a sandbox that is gone afterwards; the figures, the threshold
    checks and what was run. Progress reaches ``progress(phase, done, total)`` in this thread.
    ``against`` names the baselines (``store``, ``cache``); without it, ``against_cache``.
    """
    policy = policy or TenantPolicy.default()
    if against is None:
        against = ("cache",) if against_cache else ()
    figures = in_sandbox(
        partial(
            evaluate_in_sandbox,
            scenario_set=scenario_set,
            against=tuple(against),
            settings=settings,
            sweep=sweep,
            keep_runs=keep_runs,
        ),
        policy=policy,
        progress=progress,
    )
    checks = thresholds_check(figures, thresholds_effective(scenario_set.thresholds))
    return {
        "scenario_set": {
            "name": scenario_set.name,
            "source": scenario_set.source,
            "digest": scenario_set.digest,
            "decisions": len(scenario_set.scenarios),
            "canaries": len(scenario_set.canaries),
            "classes": scenario_set.classes,
        },
        "embedding_model": policy.embedding_model,
        "note": policy.note,
        **figures,
        "thresholds": [dataclasses.asdict(c) for c in checks],
        "passed": all(c.passed for c in checks),
    }
