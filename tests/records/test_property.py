"""Whatever JSON arrives at the write boundary: never a 500, and either exactly the rows of
a success or none at all."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from apps.records.models import MemoryRecord
from apps.tenancy.context import tenant_scope

from .factories import body
from .support import RECORDS, post_raw

pytestmark = pytest.mark.django_db

# Text including NUL, control characters and unpaired surrogates (sent as \uXXXX escapes).
TEXT = st.text(st.characters(exclude_categories=()), max_size=12)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT
)
JSON = st.recursive(
    SCALARS,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(TEXT, children, max_size=4),
    max_leaves=10,
)

# Stands for the JSON number 1e400, which Python's json module cannot produce but a client
# can send (it parses to infinity).
OVERFLOW = "<<1e400>>"

# Values that are nearly right: what a confused client sends.
PLAUSIBLE = st.sampled_from(
    [
        "",
        " ",
        "user:8812",
        "shipping.preference",
        "interaction",
        "user_action",
        "personal",
        "public",
        "consent",
        "session",
        "indefinite",
        "P30D",
        "PT1H",
        "P0D",
        "P1Y",
        "-P1D",
        "2025-01-14T09:12:00Z",
        "2025-01-14T09:12:00",
        "2999-01-01T00:00:00Z",
        "0001-01-01T00:00:00+05:00",
        "none",
        "applied",
        [],
        {},
        ["email"],
        0,
        -1,
        10**30,
        1e308,
    ]
)

# What PostgreSQL cannot store: NUL, unpaired surrogates, numbers beyond a double.
NASTY = st.sampled_from(
    [
        "\x00",
        "carrier\x00a",
        "carrier\ud800",
        "\udfff",
        {"note": "\x00"},
        {"note\x00": 1},
        [{"deep": "\udfff"}],
        OVERFLOW,
        [1, OVERFLOW],
        "2025-01-14T09:12:00\x00Z",
    ]
)

PATHS = [
    ("key",),
    ("subject",),
    ("value",),
    ("content",),
    ("source",),
    ("source", "kind"),
    ("source", "ref"),
    ("source", "run_id"),
    ("observed_at",),
    ("owner",),
    ("reason",),
    ("scope",),
    ("scope", "domain"),
    ("scope", "task_type"),
    ("scope", "conditions"),
    ("sensitivity",),
    ("retention",),
    ("retention", "basis"),
    ("retention", "ttl"),
    ("retention", "consent_ref"),
    ("redaction",),
    ("redaction", "state"),
    ("redaction", "fields"),
    ("writer",),
    ("trust",),
    ("unexpected",),
]

# Members that end up in a text or jsonb column when the rest of the body is valid.
STORED_PATHS = [
    ("value",),
    ("value",),
    ("content",),
    ("reason",),
    ("source", "ref"),
    ("source", "turn_id"),
    ("scope", "conditions"),
    ("retention", "consent_ref"),
    ("redaction", "fields"),
]

MUTATION = st.tuples(
    st.sampled_from(PATHS),
    st.sampled_from(["delete", "set"]),
    st.one_of(PLAUSIBLE, JSON),
)


def _mutate(data: dict[str, Any], mutations: list[tuple[tuple[str, ...], str, Any]]) -> Any:
    data = copy.deepcopy(data)
    for path, action, value in mutations:
        target = data
        for part in path[:-1]:
            if not isinstance(target.get(part), dict):
                target[part] = {}
            target = target[part]
        if action == "delete":
            target.pop(path[-1], None)
        else:
            target[path[-1]] = value
    return data


VALID = st.builds(
    lambda key, value, ref: body(key=key, value=value, source__ref=ref),
    st.sampled_from(["shipping.preference", "language", "a.b-c_d"]),
    st.sampled_from(["carrier_a", "carrier_b", {"n": 1}]),
    st.sampled_from(["interaction:1", "interaction:2", "document:3"]),
)

BODIES = st.one_of(
    JSON,
    st.builds(_mutate, VALID, st.lists(MUTATION, max_size=3)),
    # A valid body with one value the database cannot store, where it would be stored.
    st.builds(
        _mutate,
        VALID,
        st.lists(st.tuples(st.sampled_from(STORED_PATHS), st.just("set"), NASTY), max_size=1),
    ),
)


def _records(tenant: Any) -> int:
    with tenant_scope(tenant.pk):
        return MemoryRecord.objects.count()


@settings(
    max_examples=150,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=BODIES)
def test_it_never_fails_and_stores_all_or_nothing(agent, tenant, data):
    before = _records(tenant)
    # ensure_ascii: unpaired surrogates travel as \ud800 escapes, as any client may send them.
    raw = json.dumps(data, ensure_ascii=True).replace(f'"{OVERFLOW}"', "1e400")
    response = post_raw(agent, RECORDS, raw)
    after = _records(tenant)
    event(f"status {response.status_code}")
    if response.status_code in (200, 201):
        event(f"outcome {response.json()['outcome']}")
    assert response.status_code != 500, response.content[:500]
    if response.status_code in (200, 201):
        outcome = response.json()["outcome"]
        expected = 1 if outcome in {"created", "conflict"} else 0
        assert after - before == expected, outcome
        assert (response.status_code == 200) == (outcome == "unchanged")
    else:
        assert response.status_code in (400, 413), response.content[:500]
        assert response["Content-Type"] == "application/problem+json"
        assert after == before
