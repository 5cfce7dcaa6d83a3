"""The vector rule against pgvector itself: every pair of vectors it accepts has a finite
cosine distance in the database, whatever their magnitudes."""

from __future__ import annotations

import math

import numpy as np
import pytest
from django.db import connection
from hypothesis import given, settings
from hypothesis import strategies as st

from apps.derivations.vectors import VectorRejected, vector_checked

pytestmark = pytest.mark.django_db

# Magnitudes across the whole double range, where float32 rounding, underflow and overflow
# of the squares all happen.
components = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.builds(lambda m, e: m * 10.0**e, st.floats(-10, 10), st.integers(-330, 40)),
    st.just(0.0),
)
vectors = st.lists(components, min_size=4, max_size=4)


def accepted(raw: list[float]) -> list[float] | None:
    try:
        return vector_checked(raw, dimension=4)
    except VectorRejected:
        return None


@settings(max_examples=150, deadline=None, database=None)
@given(first=vectors, second=vectors)
def test_every_pair_of_accepted_vectors_has_a_finite_cosine_distance(first, second):
    a, b = accepted(first), accepted(second)
    with connection.cursor() as cursor:
        for left, right in [(a, a), (b, b), (a, b)]:
            if left is None or right is None:
                continue
            cursor.execute("SELECT %s::vector <=> %s::vector", [str(left), str(right)])
            (distance,) = cursor.fetchone()
            assert math.isfinite(distance), (left, right, distance)


def test_the_accepted_vector_is_what_pgvector_stores():
    stored = vector_checked([0.1, 1e-20, 3, 0], dimension=4)
    with connection.cursor() as cursor:
        cursor.execute("SELECT %s::vector::real[]", [str(stored)])
        (back,) = cursor.fetchone()
    # psycopg reads a real back through its shortest text ("0.1"): compare as float32.
    assert [float(np.float32(x)) for x in back] == stored
