"""Retrieval quality: the search API beside BM25, an exact dense ranking and their fusion.

    .venv/bin/python benchmarks/retrieval_quality.py --data ../shared/data/locomo-dev
        [--model NAME] [--limit-questions N] [--multilingual-only | --locomo-only] [--json OUT]

Two measurements on the embedded database, each in a fresh tenant whose embedding model is
``--model`` (default: the product's, ``apps.derivations.embedders.DEFAULT_MODEL``), with an
agent credential; every memory is written through ``POST /api/v1/records`` and every question
asked through ``POST /api/v1/search`` (Django's test client, in process: the whole HTTP stack,
authentication and row-level security included, without a server). Queued embeddings are
drained before asking; a model that embeds at write time leaves nothing to drain.

1. LoCoMo (``--data``: one conversation per JSON file, as published; read, never copied):
   every turn is a record (``"{speaker}: {text}"``, subject ``conversation:<n>``, observed
   at its session's date); every answerable question (categories 1-4 with evidence) is asked
   with ``{"query", "subject", "top_k": 10}``, and the evidence turns among the hits are
   counted: recall@1/5/10 (the share of a question's evidence turns found) and hit@1/5/10 (at
   least one found), overall and per category. Beside it, on the same turns in the same run:
   BM25 (rank_bm25's BM25Okapi over ``\\w+`` tokens, untuned; turns matching no query word
   are not ranked, as an index returns them), an exact dense ranking with the tenant's model
   (numpy cosine over every turn of the conversation; questions embedded as queries where the
   model tells them apart) and their reciprocal rank fusion (k = 60). ``--limit-questions``
   takes that many questions, in turn from each conversation (every turn is still stored).
2. The shipped multilingual set (benchmarks/data/retrieval_multilingual.json): its memories
   in one tenant, each query asked with ``{"query", "top_k": 5}``; hit@1, hit@5 and the
   share answered ``[]`` per language, category and cross-lingual direction, calibration and
   test splits apart (test is the headline). Unrelated queries should be answered ``[]``
   (target >= 95 %), the others found in the top 5 (target hit@5 >= 0.90). Every query is
   asked again with ``"min_similarity": 0`` to read the similarities a floor decides on:
   the best candidate's of each unrelated query and the sought memory's of each other one.
   The floor suggested from the calibration split is then checked on the test split.
3. Decision searches on the same set: the floor a decision search is held to for its count
   of candidates, fitted on the calibration split's unrelated (question, memory) pairs
   (apps.derivations.embedders.DECISION_FLOOR_CURVES); then every memory is confirmed (a
   second credential observes it) and each query is asked with ``{"query", "purpose":
   "decision", "scope", "subject", "top_k": 5}``: a relevant one for its memory's subject
   (one or two memories), an unrelated one for every subject in turn, which should be
   answered ``[]`` (target >= 95 %).

``--json OUT`` writes every figure and each question's outcome, to compare runs and models.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

try:
    from rank_bm25 import BM25Okapi  # type: ignore[import-untyped]
except ImportError:  # the test extra's, not the product's: say so before minutes of writes
    sys.exit("benchmarks/retrieval_quality.py needs rank-bm25: pip install -e '.[test]'")

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.harness import bench_database, progress, setup_django, table

MULTILINGUAL_SET = Path(__file__).resolve().parent / "data" / "retrieval_multilingual.json"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
KS = (1, 5, 10)
RRF_K = 60
LOCOMO_TOP_K = 10
MULTILINGUAL_TOP_K = 5
MULTILINGUAL_DOMAIN = "assistant"
# The widest search the API allows: with min_similarity 0 it returns every candidate of the
# multilingual tenant, so the sought memory's similarity is read even when it ranks low.
ALL_CANDIDATES = 100
# The suggested floor: the best similarity of TARGET_ABSTAIN of the calibration split's
# unrelated queries, rounded up to a multiple of FLOOR_STEP (the rule the models' floors in
# apps/derivations/embedders.py follow); the table shows the floors around it at a finer step.
FLOOR_STEP = 0.05
TABLE_STEP = 0.01
TARGET_ABSTAIN = 0.95
TARGET_HIT5 = 0.90
WORD_RE = re.compile(r"\w+")
SESSION_DATE = "%I:%M %p on %d %B, %Y"  # "1:56 pm on 8 May, 2023"
EVIDENCE_SPLIT = re.compile(r"[;,\s]+")  # a few evidence lists are one "D8:6; D9:17" string


def tokens(text: str) -> list[str]:
    return WORD_RE.findall(text.lower())


def ratio(part: float, whole: float) -> str:
    return f"{part / whole:.2f}x" if whole else "n/a"


# --- the product, through its HTTP API ---------------------------------------------------------


class Agent:
    """An agent credential of a fresh tenant, calling the API in process."""

    def __init__(self, slug: str, model: str) -> None:
        from django.conf import settings
        from django.test import Client

        from apps.core.actors import Actor
        from apps.governance.services import retention_rule_set
        from apps.tenancy.context import tenant_scope
        from apps.tenancy.services import credential_issue, tenant_create

        # Nothing serves this throw-away database's broker: the benchmark drains the queued
        # embeddings itself (drain below) instead of waking a worker.
        settings.OUTBOX_RELAY_ON_COMMIT = False
        actor = Actor.system("benchmark")
        self.tenant = tenant_create(slug=slug, name=f"Retrieval quality ({slug})", actor=actor)
        self.tenant.embedding_model = model  # a tenant setting, chosen before any write
        self.tenant.save(update_fields=["embedding_model"])
        with tenant_scope(self.tenant.pk):
            # Conversations observed years ago must stay live however expiry is counted (from
            # the write or from observed_at): the class's limit is set beyond the benchmark.
            retention_rule_set(
                tenant=self.tenant,
                sensitivity="internal",
                provisional_max=timedelta(days=36500),
                confirmed_max=None,
                actor=actor,
                reason="benchmark memories are kept for the whole run",
            )
            _credential, token = credential_issue(tenant=self.tenant, name="bench", actor=actor)
            _credential, observer = credential_issue(
                tenant=self.tenant, name="bench-observer", actor=actor
            )
        self.client = Client(HTTP_HOST="127.0.0.1")
        self.headers = {"authorization": f"Bearer {token}"}
        # A second credential: an independent source whose observation of the same value
        # confirms a memory (confirm_all), as a decision search requires.
        self.observer_headers = {"authorization": f"Bearer {observer}"}

    def post(self, path: str, body: dict[str, Any], expected: int) -> Any:
        response = self.client.post(path, body, "application/json", headers=self.headers)
        if response.status_code != expected:
            raise SystemExit(f"POST {path}: {response.status_code} {response.content[:600]!r}")
        return response.json()

    def write(self, body: dict[str, Any]) -> str:
        return str(self.post("/api/v1/records", body, 201)["id"])

    def confirm_all(self, bodies: Sequence[dict[str, Any]]) -> None:
        """Confirm every memory written with ``bodies``: the tenant confirms on a second
        independent observation, and the observer credential observes each again."""
        self.tenant.auto_promote_on_second_observation = True
        self.tenant.save(update_fields=["auto_promote_on_second_observation"])
        for body in bodies:
            seen = {**body, "source": {**body["source"], "ref": body["source"]["ref"] + ":seen"}}
            response = self.client.post(
                "/api/v1/records", seen, "application/json", headers=self.observer_headers
            )
            if response.status_code not in (200, 201) or response.json()["trust"] != "confirmed":
                raise SystemExit(f"observing {body['key']}: {response.content[:600]!r}")

    def search(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        results: list[dict[str, Any]] = self.post("/api/v1/search", body, 200)["results"]
        return results

    def drain(self) -> int:
        """Embed whatever the writes queued (the worker's job under ``up``); how many."""
        from apps.derivations.embeddings import embeddings_drain

        embedded = 0
        while True:
            outcome = embeddings_drain(self.tenant.pk, budget=60.0)
            embedded += outcome.embedded
            if not outcome.claimed:
                return embedded


def hit_record_ids(results: Iterable[dict[str, Any]]) -> list[str]:
    return [str(hit["record"]["id"]) for hit in results if hit.get("type") == "record"]


def write_all(agent: Agent, bodies: Sequence[dict[str, Any]], label: str) -> list[str]:
    ids = []
    started = time.perf_counter()
    step = max(1, math.ceil(len(bodies) / 10))
    for n, body in enumerate(bodies, 1):
        ids.append(agent.write(body))
        if n % step == 0 or n == len(bodies):
            rate = n / (time.perf_counter() - started)
            progress(f"{label}: wrote {n}/{len(bodies)} ({rate:.0f}/s)")
    started = time.perf_counter()
    drained = agent.drain()
    progress(
        f"{label}: drained {drained} queued embeddings in {time.perf_counter() - started:.1f}s"
    )
    return ids


# --- embeddings, for the exact dense baseline ------------------------------------------------


class Dense:
    """The tenant's model used directly: passages with ``embed``, questions with the model's
    query embedding where it has one (an asymmetric model such as e5), else ``embed``."""

    def __init__(self, model: str) -> None:
        from apps.derivations.embedders import get_embedder

        self.embedder = get_embedder(model)
        self.computes = bool(self.embedder.computes)
        self.query_method = next(
            (
                n
                for n in ("embed_queries", "embed_query")
                if callable(getattr(self.embedder, n, None))
            ),
            "embed",
        )

    def _unit(self, vectors: Any) -> np.ndarray:
        matrix = np.asarray(vectors, dtype=np.float32)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        return matrix / np.where(norms > 0, norms, 1.0)

    def passages(self, texts: Sequence[str]) -> np.ndarray:
        return self._unit(self.embedder.embed(list(texts)))

    def queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._unit(getattr(self.embedder, self.query_method)(list(texts)))


# --- LoCoMo ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Turn:
    conversation: str
    dia_id: str
    speaker: str
    text: str
    observed_at: datetime

    @property
    def content(self) -> str:
        return f"{self.speaker}: {self.text}"

    def body(self) -> dict[str, Any]:
        return {
            "key": "turn." + self.dia_id.lower().replace(":", "_"),
            "subject": f"conversation:{self.conversation}",
            "value": self.text,
            "content": self.content,
            "source": {"kind": "interaction", "ref": f"locomo:{self.conversation}:{self.dia_id}"},
            "observed_at": self.observed_at.isoformat().replace("+00:00", "Z"),
            "owner": "service:locomo",
            "reason": "a conversation turn kept as long-term memory",
            "scope": {"domain": "conversation"},
            "sensitivity": "internal",
            "retention": {"basis": "indefinite"},
        }


@dataclass(frozen=True)
class Question:
    conversation: str
    text: str
    category: int
    evidence: frozenset[str]


@dataclass
class Conversation:
    name: str
    turns: list[Turn]
    questions: list[Question]
    dropped_evidence: int = 0  # evidence ids naming no turn of the conversation


def load_conversation(path: Path) -> Conversation:
    data = json.loads(path.read_text(encoding="utf-8"))
    name = data.get("sample_id") or path.stem.rsplit("-", 1)[-1]
    name = re.sub(r"[^A-Za-z0-9._-]", "-", str(name))
    turns: list[Turn] = []
    sessions = sorted((int(k.split("_")[1]), k) for k in data if re.fullmatch(r"session_\d+", k))
    for _, key in sessions:
        observed = datetime.strptime(data[f"{key}_date_time"].strip(), SESSION_DATE)
        for turn in data[key]:
            turns.append(
                Turn(
                    name,
                    turn["dia_id"],
                    turn["speaker"],
                    turn["text"],
                    observed.replace(tzinfo=UTC),
                )
            )
    known = {turn.dia_id for turn in turns}
    conversation = Conversation(name, turns, [])
    for qa in data.get("qa", []):
        if qa.get("category") not in CATEGORIES:
            continue
        cited = {e for item in qa.get("evidence") or [] for e in EVIDENCE_SPLIT.split(item) if e}
        evidence = frozenset(cited & known)
        conversation.dropped_evidence += len(cited - known)
        if evidence:
            conversation.questions.append(Question(name, qa["question"], qa["category"], evidence))
    return conversation


def take_questions(conversations: list[Conversation], limit: int | None) -> list[Question]:
    """Every question, or ``limit`` of them taken in turn from each conversation."""
    if limit is None:
        return [q for c in conversations for q in c.questions]
    queues = [list(c.questions) for c in conversations]
    taken: list[Question] = []
    while len(taken) < limit and any(queues):
        for queue in queues:
            if queue and len(taken) < limit:
                taken.append(queue.pop(0))
    return taken


def bm25_rankings(turns: list[Turn], questions: list[Question]) -> list[list[int]]:
    index = BM25Okapi([tokens(turn.content) for turn in turns])
    rankings = []
    for question in questions:
        scores = np.asarray(index.get_scores(tokens(question.text)))
        order = np.argsort(-scores, kind="stable")
        rankings.append([int(i) for i in order if scores[i] > 0])
    return rankings


def dense_rankings(dense: Dense, turns: list[Turn], questions: list[Question]) -> list[list[int]]:
    passages = dense.passages([turn.content for turn in turns])
    asked = dense.queries([question.text for question in questions])
    similarities = asked @ passages.T
    return [[int(i) for i in np.argsort(-row, kind="stable")] for row in similarities]


def fused(first: list[int], second: list[int]) -> list[int]:
    """Reciprocal rank fusion of two rankings (k = 60); an item missing from one gains
    nothing from it."""
    scores: dict[int, float] = {}
    for ranking in (first, second):
        for rank, item in enumerate(ranking, 1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (RRF_K + rank)
    return sorted(scores, key=lambda item: -scores[item])


@dataclass
class Scores:
    """recall@k and hit@k of one ranking over some questions."""

    recall: dict[int, list[float]] = field(default_factory=lambda: {k: [] for k in KS})
    hit: dict[int, list[float]] = field(default_factory=lambda: {k: [] for k in KS})

    def add(self, ranked: Sequence[str], evidence: frozenset[str]) -> None:
        for k in KS:
            found = len(evidence & set(ranked[:k]))
            self.recall[k].append(found / len(evidence))
            self.hit[k].append(1.0 if found else 0.0)

    @property
    def count(self) -> int:
        return len(self.recall[KS[0]])

    def mean(self, kind: str, k: int) -> float:
        values = (self.recall if kind == "recall" else self.hit)[k]
        return statistics.fmean(values) if values else 0.0


def run_locomo(args: argparse.Namespace, dense: Dense) -> dict[str, Any]:
    paths = sorted(Path(args.data).glob("*.json"))
    if not paths:
        raise SystemExit(f"No LoCoMo JSON files in {args.data}")
    conversations = [load_conversation(path) for path in paths]
    questions = take_questions(conversations, args.limit_questions)
    turn_count = sum(len(c.turns) for c in conversations)
    progress(
        f"LoCoMo: {len(conversations)} conversations, {turn_count} turns, "
        f"{len(questions)} questions; model {args.model}"
    )

    agent = Agent("locomo", args.model)
    bodies = [turn.body() for c in conversations for turn in c.turns]
    ids = write_all(agent, bodies, "LoCoMo turns")
    turn_of = dict(
        zip(ids, ((t.conversation, t.dia_id) for c in conversations for t in c.turns), strict=True)
    )

    rankings: dict[str, list[list[str]]] = {"product": []}
    answered_empty = 0
    started = time.perf_counter()
    step = max(1, math.ceil(len(questions) / 10))
    for n, question in enumerate(questions, 1):
        results = agent.search(
            {
                "query": question.text,
                "subject": f"conversation:{question.conversation}",
                "top_k": LOCOMO_TOP_K,
            }
        )
        answered_empty += not results
        ranked = []
        for record_id in hit_record_ids(results):
            found_in, dia_id = turn_of[record_id]
            assert found_in == question.conversation, "a hit from outside the subject"
            ranked.append(dia_id)
        rankings["product"].append(ranked)
        if n % step == 0 or n == len(questions):
            progress(f"LoCoMo: asked {n}/{len(questions)} ({time.perf_counter() - started:.0f}s)")

    progress("LoCoMo: baselines (BM25, exact dense, fusion) on the same turns ...")
    for name in ("BM25", "dense", "fusion") if dense.computes else ("BM25",):
        rankings[name] = [[] for _ in questions]
    for conversation in conversations:
        positions = [i for i, q in enumerate(questions) if q.conversation == conversation.name]
        if not positions:
            continue
        turns = conversation.turns
        asked = [questions[i] for i in positions]

        def dia_ids(order: list[int], turns: list[Turn] = turns) -> list[str]:
            return [turns[j].dia_id for j in order[:LOCOMO_TOP_K]]

        bm25 = bm25_rankings(turns, asked)
        exact = dense_rankings(dense, turns, asked) if dense.computes else None
        for n, i in enumerate(positions):
            rankings["BM25"][i] = dia_ids(bm25[n])
            if exact is not None:
                rankings["dense"][i] = dia_ids(exact[n])
                rankings["fusion"][i] = dia_ids(fused(bm25[n], exact[n]))

    scores: dict[tuple[str, str], Scores] = {}
    for ranking, lists in rankings.items():
        for question, ranked in zip(questions, lists, strict=True):
            for group in ("all", CATEGORIES[question.category]):
                scores.setdefault((group, ranking), Scores()).add(ranked, question.evidence)

    report_locomo(args, conversations, questions, rankings, scores, answered_empty, dense)
    return {
        "conversations": [c.name for c in conversations],
        "turns": turn_count,
        "questions": len(questions),
        "answered_empty": answered_empty,
        "dense_query_embedding": dense.query_method if dense.computes else None,
        "scores": {
            f"{group}/{ranking}": {
                "questions": s.count,
                **{f"recall@{k}": s.mean("recall", k) for k in KS},
                **{f"hit@{k}": s.mean("hit", k) for k in KS},
            }
            for (group, ranking), s in scores.items()
        },
        "per_question": [
            {
                "conversation": q.conversation,
                "question": q.text,
                "category": q.category,
                "evidence": sorted(q.evidence),
                **{ranking: lists[i] for ranking, lists in rankings.items()},
            }
            for i, q in enumerate(questions)
        ],
    }


def report_locomo(
    args: argparse.Namespace,
    conversations: list[Conversation],
    questions: list[Question],
    rankings: dict[str, list[list[str]]],
    scores: dict[tuple[str, str], Scores],
    answered_empty: int,
    dense: Dense,
) -> None:
    dropped = sum(c.dropped_evidence for c in conversations)
    print(
        f"\nLoCoMo retrieval, model {args.model}: {len(conversations)} conversations "
        f"({', '.join(c.name for c in conversations)}), "
        f"{sum(len(c.turns) for c in conversations)} turns stored as records, "
        f"{len(questions)} questions (categories 1-4 with evidence), top_k {LOCOMO_TOP_K}, "
        f"scoped to the conversation's subject"
    )
    if dropped:
        print(f"({dropped} evidence ids name no turn of their conversation and are not counted)")
    if not dense.computes:
        print(f"({args.model} computes no vectors: no dense or fusion rows)")
    else:
        print(f"(dense baseline: turns with embed, questions with {dense.query_method})")
    print()
    groups = ["all", *(CATEGORIES[c] for c in sorted(CATEGORIES))]
    rows: list[list[object]] = []
    for group in groups:
        for ranking in rankings:
            s = scores.get((group, ranking))
            if s is None:
                continue
            rows.append(
                [
                    group,
                    s.count,
                    ranking,
                    *(f"{s.mean('recall', k):.3f}" for k in KS),
                    *(f"{s.mean('hit', k):.3f}" for k in KS),
                ]
            )
    print(
        table(
            [
                "questions",
                "n",
                "ranking",
                *(f"recall@{k}" for k in KS),
                *(f"hit@{k}" for k in KS),
            ],
            rows,
        )
    )
    product = scores[("all", "product")].mean("recall", 10)
    bm25 = scores[("all", "BM25")].mean("recall", 10)
    print(f"\nproduct recall@10 / BM25 recall@10:  {ratio(product, bm25)}")
    if ("all", "dense") in scores:
        exact = scores[("all", "dense")].mean("recall", 10)
        print(f"product recall@10 / dense recall@10: {ratio(product, exact)}")
    print(
        f"product answered [] for {answered_empty} of {len(questions)} questions "
        f"({answered_empty / len(questions):.1%})"
    )
    sys.stdout.flush()


# --- the multilingual set ----------------------------------------------------------------------


@dataclass
class Asked:
    """One query of the multilingual set and what the search answered."""

    item: dict[str, Any]
    memory_language: str | None
    ranked: list[str]  # memory ids, best first (top_k 5)
    similarity: float | None  # with min_similarity 0: the sought memory's, or the best's
    # for an unrelated query; None when it was not returned at all
    # An unrelated query's similarity to every memory (min_similarity 0): the pairs a decision
    # search's floor is fitted on (report_decision_floor).
    every: list[float] = field(default_factory=list)

    @property
    def relevant(self) -> bool:
        return self.item["memory"] is not None

    @property
    def abstained(self) -> bool:
        return not self.ranked

    def hit(self, k: int) -> bool:
        return self.item["memory"] in self.ranked[:k]

    @property
    def direction(self) -> str:
        return f"{self.item['language']}->{self.memory_language}"


def run_multilingual(args: argparse.Namespace) -> dict[str, Any]:
    data = json.loads(MULTILINGUAL_SET.read_text(encoding="utf-8"))
    memories = {m["id"]: m for m in data["memories"]}
    progress(
        f"multilingual: {len(memories)} memories, {len(data['queries'])} queries; "
        f"model {args.model}"
    )
    agent = Agent("multilingual", args.model)
    bodies = [
        {
            "key": m["key"],
            "subject": m["subject"],
            "value": m["content"],
            "content": m["content"],
            "source": {"kind": "interaction", "ref": f"quality-set:{m['id']}"},
            # Now: a lifetime counts from observed_at, so a fixed date would expire.
            "observed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "owner": "service:assistant",
            "reason": "stated by the user in a conversation",
            "scope": {"domain": MULTILINGUAL_DOMAIN},
            "sensitivity": "internal",
            "retention": {"basis": "indefinite"},
        }
        for m in memories.values()
    ]
    ids = write_all(agent, bodies, "multilingual memories")
    memory_of = dict(zip(ids, memories, strict=True))

    asked: list[Asked] = []
    started = time.perf_counter()
    queries = data["queries"]
    step = max(1, math.ceil(len(queries) / 10))
    for n, item in enumerate(queries, 1):
        results = agent.search({"query": item["query"], "top_k": MULTILINGUAL_TOP_K})
        ranked = [memory_of[i] for i in hit_record_ids(results)]
        # The same query with no floor: the similarities a floor would decide on.
        every = agent.search({"query": item["query"], "top_k": ALL_CANDIDATES, "min_similarity": 0})
        similarities = {
            memory_of[str(hit["record"]["id"])]: hit["why"]["vector"]
            for hit in every
            if hit.get("type") == "record" and hit["why"]["vector"] is not None
        }
        if item["memory"] is None:
            similarity = max(similarities.values(), default=None)
        else:
            similarity = similarities.get(item["memory"])
        target = memories.get(item["memory"]) if item["memory"] else None
        every_pair = [] if target else sorted(similarities.values())
        asked.append(
            Asked(item, target["language"] if target else None, ranked, similarity, every_pair)
        )
        if n % step == 0 or n == len(queries):
            progress(
                f"multilingual: asked {n}/{len(queries)} ({time.perf_counter() - started:.0f}s)"
            )

    floor = report_multilingual(args, asked)
    decision_floor = report_decision_floor(args, asked)
    decided = run_decisions(agent, bodies, list(memories.values()), memory_of, queries)
    decisions = report_decisions(decided)
    return {
        "memories": len(memories),
        "queries": len(asked),
        "floor": floor,
        "decision_floor": decision_floor,
        "decisions": decisions,
        "per_query": [
            {
                **a.item,
                "returned": a.ranked,
                "similarity": a.similarity,
            }
            for a in asked
        ],
    }


def share(items: list[Asked], test: Callable[[Asked], bool]) -> str:
    return f"{sum(1 for a in items if test(a)) / len(items):.2f}" if items else "-"


def rows_for(groups: dict[str, list[Asked]]) -> list[list[object]]:
    rows: list[list[object]] = []
    for name, items in groups.items():
        relevant = [a for a in items if a.relevant]
        unrelated = [a for a in items if not a.relevant]
        rows.append(
            [
                name,
                len(relevant),
                share(relevant, lambda a: a.hit(1)),
                share(relevant, lambda a: a.hit(5)),
                share(relevant, lambda a: a.abstained),
                len(unrelated),
                share(unrelated, lambda a: a.abstained),
            ]
        )
    return rows


GROUP_HEADERS = [
    "",
    "queries",
    "hit@1",
    "hit@5",
    "answered []",
    "unrelated",
    "unrelated answered []",
]


def grouped(items: list[Asked], key: Callable[[Asked], str]) -> dict[str, list[Asked]]:
    groups: dict[str, list[Asked]] = {}
    for a in items:
        groups.setdefault(key(a), []).append(a)
    return groups


def direction_group(a: Asked) -> str:
    asked_in, stored_in = a.item["language"], a.memory_language
    if asked_in == "en":
        return "from English (en->xx)"
    if stored_in == "en":
        return "to English (xx->en)"
    return "between the others"


def report_multilingual(args: argparse.Namespace, asked: list[Asked]) -> dict[str, Any]:
    languages = ["en", "fa", "tr", "ru", "ar"]
    categories = ["paraphrase", "inflection", "typo", "crosslingual", "keyword", "unrelated"]
    print(
        f"\nMultilingual set, model {args.model}: {len(asked)} queries, top_k "
        f"{MULTILINGUAL_TOP_K}, no filter. hit@k: the sought memory among the first k; "
        f"answered []: no result at all (the right answer for an unrelated query)."
    )
    for split in ("test", "calibration"):
        items = [a for a in asked if a.item["split"] == split]
        title = "the headline" if split == "test" else "the split a floor is tuned on"
        print(f"\n{split} split ({len(items)} queries, {title}), by language of the query\n")
        by_language = grouped(items, lambda a: a.item["language"])
        print(
            table(
                GROUP_HEADERS,
                rows_for({lang: by_language.get(lang, []) for lang in languages})
                + rows_for({"all": items}),
            )
        )
        print(f"\n{split} split, by category\n")
        by_category = grouped(items, lambda a: a.item["category"])
        print(table(GROUP_HEADERS, rows_for({c: by_category.get(c, []) for c in categories})))
        crosslingual = [a for a in items if a.item["category"] == "crosslingual"]
        print(f"\n{split} split, cross-lingual queries by direction (query->memory)\n")
        groups = grouped(crosslingual, direction_group)
        pairs = grouped(
            [a for a in crosslingual if {a.item["language"], a.memory_language} == {"en", "fa"}],
            lambda a: a.direction,
        )
        print(
            table(
                GROUP_HEADERS[:5],
                [row[:5] for row in rows_for(dict(sorted(groups.items())))]
                + [row[:5] for row in rows_for(dict(sorted(pairs.items())))],
            )
        )
    sys.stdout.flush()
    floor = report_floor(args, asked)
    report_targets(asked)
    return floor


def distribution(values: list[float]) -> list[object]:
    if not values:
        return [0, "-", "-", "-", "-", "-"]
    ordered = sorted(values)

    def at(p: float) -> str:
        return f"{ordered[min(len(ordered) - 1, round(p * (len(ordered) - 1)))]:.3f}"

    return [len(values), f"{ordered[0]:.3f}", at(0.1), at(0.5), at(0.9), f"{ordered[-1]:.3f}"]


def report_floor(args: argparse.Namespace, asked: list[Asked]) -> dict[str, Any]:
    """Similarities on the calibration split, the floor they suggest, and that floor on test."""
    from apps.derivations.embedders import get_embedder

    current = float(get_embedder(args.model).relevance_floor)
    calibration = [a for a in asked if a.item["split"] == "calibration"]
    test = [a for a in asked if a.item["split"] == "test"]

    def sims(items: list[Asked], relevant: bool) -> list[float]:
        # Not returned with min_similarity 0: no similarity above 0 (counted as 0).
        return [a.similarity or 0.0 for a in items if a.relevant == relevant]

    relevant, unrelated = sims(calibration, True), sims(calibration, False)
    print(
        f"\nCosine similarity (why.vector, searched with min_similarity 0), calibration split, "
        f"model {args.model} (its floor today: {current:.2f})\n"
    )
    headers = ["queries", "n", "min", "p10", "p50", "p90", "max"]
    rows = [
        ["relevant: the sought memory's", *distribution(relevant)],
        ["unrelated: the best candidate's", *distribution(unrelated)],
    ]
    for category in ("paraphrase", "inflection", "typo", "crosslingual", "keyword"):
        values = [a.similarity or 0.0 for a in calibration if a.item["category"] == category]
        rows.append([f"  relevant, {category}", *distribution(values)])
    print(table(headers, rows))
    if not unrelated:
        return {"current": current}
    ranked = sorted(unrelated)
    quantile = ranked[min(len(ranked) - 1, math.ceil(TARGET_ABSTAIN * len(ranked)) - 1)]
    suggested = round(math.floor(round(quantile / FLOOR_STEP, 6)) * FLOOR_STEP + FLOOR_STEP, 2)

    def at_floor(items: list[Asked], value: float) -> tuple[float, float]:
        kept = sims(items, True)
        noise = sims(items, False)
        return (
            sum(1 for v in kept if v >= value) / max(1, len(kept)),
            sum(1 for v in noise if v < value) / max(1, len(noise)),
        )

    print(
        f"\nSuggested floor: {suggested:.2f} (the best similarity of {TARGET_ABSTAIN:.0%} of "
        f"the calibration split's unrelated queries, {quantile:.3f}, rounded up to a multiple "
        f"of {FLOOR_STEP}). By vector alone, at each floor: relevant queries whose memory stays "
        f"at or above it, unrelated queries whose every candidate falls below it\n"
    )
    floors = sorted({round(current, 3), suggested} | _nearby(suggested))
    rows = []
    for value in floors:
        kept_cal, below_cal = at_floor(calibration, value)
        kept_test, below_test = at_floor(test, value)
        note = " (suggested)" if math.isclose(value, suggested) else ""
        note += " (today's)" if math.isclose(value, current) else ""
        rows.append(
            [
                f"{value:.3f}{note}",
                f"{kept_cal:.2f}",
                f"{below_cal:.2f}",
                f"{kept_test:.2f}",
                f"{below_test:.2f}",
            ]
        )
    print(
        table(
            [
                "floor",
                "calibration: relevant kept",
                "unrelated below",
                "test: relevant kept",
                "unrelated below",
            ],
            rows,
        )
    )
    print(
        "(A relevant memory under the floor is still returned when its text matches the query:"
        "\n a hit matches by its text or by its vector.)"
    )
    kept_test, below_test = at_floor(test, suggested)
    return {
        "current": current,
        "suggested": suggested,
        "calibration_relevant": relevant,
        "calibration_unrelated": unrelated,
        "test_relevant_kept": kept_test,
        "test_unrelated_below": below_test,
    }


def _nearby(value: float) -> set[float]:
    return {
        round(value + TABLE_STEP * step, 2)
        for step in (-3, -2, -1, 1, 2)
        if value + TABLE_STEP * step > 0
    }


def report_targets(asked: list[Asked]) -> None:
    test = [a for a in asked if a.item["split"] == "test"]
    checks: list[tuple[str, str, bool]] = []
    unrelated = [a for a in test if not a.relevant]
    abstained = sum(1 for a in unrelated if a.abstained) / max(1, len(unrelated))
    checks.append(
        (
            f"unrelated queries answered [] >= {TARGET_ABSTAIN:.0%}",
            f"{abstained:.2f}",
            abstained >= TARGET_ABSTAIN,
        )
    )
    for category in ("paraphrase", "inflection", "typo", "crosslingual", "keyword"):
        items = [a for a in test if a.item["category"] == category]
        hit5 = sum(1 for a in items if a.hit(5)) / max(1, len(items))
        checks.append(
            (f"{category} hit@5 >= {TARGET_HIT5:.2f}", f"{hit5:.2f}", hit5 >= TARGET_HIT5)
        )
    print("\nTargets (multilingual set, test split)")
    for label, measured, ok in checks:
        print(f"  [{'PASS' if ok else 'FAIL'}] {label}: {measured}")


# --- decision searches over the multilingual set -----------------------------------------------

# Candidate counts the decision floor is fitted over (apps.derivations.embedders
# .DECISION_FLOOR_CURVES): a decision search is narrowed to a few memories by its filters, and
# past about a hundred candidates the curve meets the model's floor.
DECISION_COUNTS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128)
DECISION_ALPHA = 1 - TARGET_ABSTAIN
DECISION_BOOTSTRAP = 2000


def _union_quantiles(values: np.ndarray) -> np.ndarray:
    """For each of DECISION_COUNTS' n: the similarity an unrelated pair exceeds with
    probability DECISION_ALPHA / n."""
    return np.array([np.quantile(values, 1 - DECISION_ALPHA / n) for n in DECISION_COUNTS])


def report_decision_floor(args: argparse.Namespace, asked: list[Asked]) -> dict[str, Any]:
    """The decision floor the calibration split suggests (apps.derivations.embedders
    .DECISION_FLOOR_CURVES). For n candidates: the similarity an unrelated (question, memory)
    pair exceeds with probability 0.05 / n, so that, by the union bound, an unrelated question
    answers over n candidates at most 5 % of the time. A question's pairs move together (some
    questions are near every memory), so the calibration split's 20 unrelated questions, not
    its pairs, are the sample: the suggestion is the 95th percentile of those quantiles over
    DECISION_BOOTSTRAP resamples of the questions, fitted as ``base + step * log2(n)``.
    Beside it: the plain quantiles of both splits (test is never fitted on)."""
    from apps.derivations.embedders import decision_floor_curve

    per_question = {
        split: [a.every for a in asked if a.item["split"] == split and a.every]
        for split in ("calibration", "test")
    }
    calibration = per_question["calibration"]
    if not calibration:
        return {}
    plain = {
        split: _union_quantiles(np.concatenate(rows))
        for split, rows in per_question.items()
        if rows
    }
    rng = np.random.default_rng(0)
    resampled = np.array(
        [
            _union_quantiles(
                np.concatenate(
                    [calibration[i] for i in rng.integers(0, len(calibration), len(calibration))]
                )
            )
            for _ in range(DECISION_BOOTSTRAP)
        ]
    )
    upper = np.percentile(resampled, 100 * TARGET_ABSTAIN, axis=0)
    counts = np.log2(DECISION_COUNTS)
    step, base = np.polyfit(counts, upper, 1)
    current = decision_floor_curve(args.model)
    print(
        f"\nDecision floor by candidate count n: the similarity an unrelated (question, memory) "
        f"pair exceeds with probability {DECISION_ALPHA:.2f} / n; upper: its "
        f"{TARGET_ABSTAIN:.0%} bound over {DECISION_BOOTSTRAP} resamples of the calibration "
        f"split's {len(calibration)} unrelated questions. Suggested (upper, fitted): "
        f"{base:.4f} + {step:.4f} * log2(n); the model's today: "
        + (f"{current[0]} + {current[1]} * log2(n)" if current else "none")
        + "\n"
    )
    rows = []
    for index, n in enumerate(DECISION_COUNTS):
        rows.append(
            [
                n,
                f"{plain['calibration'][index]:.3f}",
                f"{upper[index]:.3f}",
                f"{base + step * math.log2(n):.3f}",
                f"{current[0] + current[1] * math.log2(n):.3f}" if current else "-",
                f"{plain['test'][index]:.3f}" if "test" in plain else "-",
            ]
        )
    print(table(["candidates", "calibration", "upper", "suggested", "today's curve", "test"], rows))
    return {
        "base": float(base),
        "step": float(step),
        "upper": upper.tolist(),
        "quantiles": {split: values.tolist() for split, values in plain.items()},
    }


@dataclass
class Decided:
    """One decision search over the multilingual set: the query, asked for one subject."""

    item: dict[str, Any]
    ranked: list[str]
    abstention: str | None

    @property
    def relevant(self) -> bool:
        return self.item["memory"] is not None


def run_decisions(
    agent: Agent,
    bodies: Sequence[dict[str, Any]],
    memories: list[dict[str, Any]],
    memory_of: dict[str, str],
    queries: list[dict[str, Any]],
) -> list[Decided]:
    """Every memory confirmed, then each query asked as a decision search narrowed to a
    subject in the memories' domain (``{"query", "purpose": "decision", "scope", "subject",
    "top_k": 5}``): a relevant query
    for its memory's subject, an unrelated one for every subject in turn."""
    agent.confirm_all(bodies)
    subject_of = {m["id"]: m["subject"] for m in memories}
    subjects = sorted(set(subject_of.values()))
    decided = []
    started = time.perf_counter()
    for n, item in enumerate(queries, 1):
        asks = [subject_of[item["memory"]]] if item["memory"] else subjects
        for subject in asks:
            answer = agent.post(
                "/api/v1/search",
                {
                    "query": item["query"],
                    "purpose": "decision",
                    "scope": {"domain": MULTILINGUAL_DOMAIN},
                    "subject": subject,
                    "top_k": 5,
                },
                200,
            )
            ranked = [memory_of[i] for i in hit_record_ids(answer["results"])]
            reason = (answer.get("abstention") or {}).get("reason")
            decided.append(Decided(item, ranked, reason))
        if n % 50 == 0 or n == len(queries):
            progress(f"decisions: asked {n}/{len(queries)} ({time.perf_counter() - started:.0f}s)")
    return decided


def report_decisions(decided: list[Decided]) -> dict[str, Any]:
    categories = ["paraphrase", "inflection", "typo", "crosslingual", "keyword"]
    print(
        "\nDecision searches (purpose decision, narrowed to a subject: one or two memories, "
        "all confirmed): a relevant query asked for its memory's subject, an unrelated one for "
        "every subject in turn\n"
    )
    rows: list[list[object]] = []
    figures: dict[str, Any] = {}
    for split in ("test", "calibration"):
        items = [d for d in decided if d.item["split"] == split]
        for category in categories:
            some = [d for d in items if d.item["category"] == category]
            if not some:
                continue
            hit = sum(1 for d in some if d.item["memory"] in d.ranked[:5]) / len(some)
            empty = sum(1 for d in some if not d.ranked) / len(some)
            rows.append([split, category, len(some), f"{hit:.2f}", f"{empty:.2f}", "-"])
        unrelated = [d for d in items if not d.relevant]
        if unrelated:
            empty = sum(1 for d in unrelated if not d.ranked) / len(unrelated)
            reasons = sorted({d.abstention for d in unrelated if d.abstention})
            rows.append(
                [split, "unrelated", len(unrelated), "-", f"{empty:.3f}", ", ".join(reasons)]
            )
            figures[f"{split}_unrelated_answered_empty"] = empty
        relevant = [d for d in items if d.relevant]
        if relevant:
            figures[f"{split}_relevant_hit5"] = sum(
                1 for d in relevant if d.item["memory"] in d.ranked[:5]
            ) / len(relevant)
    print(table(["split", "queries", "searches", "hit@5", "answered []", "abstention"], rows))
    test = figures.get("test_unrelated_answered_empty")
    if test is not None:
        ok = test >= TARGET_ABSTAIN
        print(
            f"  [{'PASS' if ok else 'FAIL'}] unrelated decision searches answered [] >= "
            f"{TARGET_ABSTAIN:.0%} (test split): {test:.3f}"
        )
    return figures


# --- main ----------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", help="a folder of LoCoMo conversations, one JSON file each")
    parser.add_argument("--model", help="the tenants' embedding model (default: the product's)")
    parser.add_argument(
        "--limit-questions",
        type=int,
        help="ask this many LoCoMo questions, in turn from each conversation",
    )
    only = parser.add_mutually_exclusive_group()
    only.add_argument("--multilingual-only", action="store_true")
    only.add_argument("--locomo-only", action="store_true")
    parser.add_argument("--json", help="write every figure and outcome to this file")
    parser.add_argument("--keep", action="store_true", help="keep the benchmark database")
    args = parser.parse_args()
    if not args.multilingual_only and not args.data:
        parser.error("--data is required unless --multilingual-only")

    report: dict[str, Any] = {}
    with bench_database("retrieval_quality", keep=args.keep):
        setup_django()
        from apps.derivations.embedders import DEFAULT_MODEL

        args.model = args.model or DEFAULT_MODEL
        dense = Dense(args.model)  # fails early on a model this installation cannot load
        report["model"] = args.model
        if not args.multilingual_only:
            report["locomo"] = run_locomo(args, dense)
        if not args.locomo_only:
            report["multilingual"] = run_multilingual(args)
    if args.json:
        Path(args.json).write_text(json.dumps(report, ensure_ascii=False, indent=1) + "\n")
        progress(f"wrote {args.json}")


if __name__ == "__main__":
    main()
