"""The one rule for a vector an agent sends: usable as pgvector will hold and compare it.

pgvector stores each component as a 32-bit float and computes the cosine distance by summing
the products and squares in 32-bit floats. A vector whose components are finite doubles can
still be unusable there: ``1e-320`` is 0 as a float32 (so ``[1e-320, ...]`` is the zero
vector), the squares of ``1e-30`` vanish, and those of ``1e20`` overflow. Each of these makes
its cosine distance NaN, to every vector or only to itself, so such a vector is refused
wherever it would be written or searched with, by :func:`vector_checked`. The same squared
length decides which stored vectors migration ``derivations.0007`` removes.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

FLOAT32_MAX = float(np.finfo(np.float32).max)
# pgvector vectorises its sum of squares, so it may add them in another order than here; half
# the float32 range leaves room for that order's rounding (any vector of length 1 is far inside).
SQUARED_LENGTH_LIMIT = FLOAT32_MAX / 2
LENGTH_LIMIT = math.sqrt(SQUARED_LENGTH_LIMIT)

NOT_NUMBERS = "A list of numbers."
NO_DIRECTION = (
    "Its length is 0 as pgvector computes it (32-bit floats: components below about 3e-23 "
    "in magnitude vanish when squared), so it has no direction to compare. Scale it up, e.g. "
    "normalise it to length 1."
)
TOO_LONG = (
    f"Its length overflows pgvector's 32-bit floats (at most about {LENGTH_LIMIT:.1e}). Scale "
    "it down, e.g. normalise it to length 1."
)


class VectorRejected(ValueError):
    """The message for the field that held the vector."""


def vector_checked(raw: Any, *, dimension: int, model: str = "") -> list[float]:
    """``raw`` as the vector pgvector will hold: ``dimension`` numbers, each finite as a
    32-bit float, whose squared length in 32-bit floats is neither 0 nor past
    :data:`SQUARED_LENGTH_LIMIT`. Returns the components as stored (rounded to float32), or
    raises :class:`VectorRejected` saying what is wrong and how to fix it.

    Within those bounds every cosine distance between two such vectors is finite: both
    squared lengths are positive and finite, and a product of two is no larger than the
    larger square.
    """
    if not isinstance(raw, list) or not all(
        isinstance(x, int | float) and not isinstance(x, bool) for x in raw
    ):
        raise VectorRejected(NOT_NUMBERS)
    if len(raw) != dimension:
        named = f", {model}" if model else ""
        raise VectorRejected(
            f"Must have {dimension} dimensions (the tenant's embedding model{named}); "
            f"got {len(raw)}."
        )
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        try:
            stored = np.array(raw, dtype=np.float64).astype(np.float32)
        except OverflowError:  # an int past a double's range
            stored = np.full(len(raw), np.inf, dtype=np.float32)
        infinite = np.flatnonzero(~np.isfinite(stored))
        if infinite.size:
            index = int(infinite[0])
            raise VectorRejected(
                f"Component {index} ({_shown(raw[index])}) is not finite as a 32-bit float, "
                "the precision vectors are stored in (its range ends near 3.4e38). Scale the "
                "vector down, e.g. normalise it to length 1."
            )
        squares = stored * stored
        if not np.any(squares > 0):
            raise VectorRejected(NO_DIRECTION)
        if not np.all(np.isfinite(squares)) or float(np.sum(squares, dtype=np.float64)) > (
            SQUARED_LENGTH_LIMIT
        ):
            raise VectorRejected(TOO_LONG)
    components: list[float] = stored.tolist()  # Python floats, each float32's value exactly
    return components


def vector_storable(vector: Any) -> bool:
    """Whether a computed vector passes :func:`vector_checked` (its own dimension)."""
    values = [float(x) for x in vector]
    try:
        vector_checked(values, dimension=len(values))
    except VectorRejected:
        return False
    return True


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def unit_length(vector: list[float]) -> list[float]:
    """``vector`` (checked by :func:`vector_checked`) scaled to length 1, in doubles. The
    cosine distance does not change, and a search's vector then fits the half-precision cast
    of a domain's index (``halfvec`` ends at 65504)."""
    length = math.sqrt(math.fsum(x * x for x in vector))
    return [x / length for x in vector]


def similarity_from_distance(distance: float | None) -> float | None:
    """The cosine similarity a search reports for a pgvector cosine distance; ``None`` when
    there is none, or when the distance is NaN (a vector stored before this rule, whose
    similarity is undefined): a hit never carries a number JSON cannot write."""
    if distance is None:
        return None
    similarity = 1.0 - float(distance)
    return similarity if math.isfinite(similarity) else None
