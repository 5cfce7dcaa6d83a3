"""Property: a search returns exactly the memories whose scope is contained in its own.

One memory in every scope of a small universe (two domains, a general and two specific task
types, every subset of two conditions); any search scope drawn from a slightly larger one
(a condition value no memory holds, no scope at all) returns the memories the rule names:
the same domain, the memory's task type empty or the search's, its conditions a subset of
the search's. With ``scope_match: exact`` it returns what the filter returned before.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apps.core.actors import Actor
from apps.retrieval.search import SearchQuery, search_scoped
from apps.tenancy.context import tenant_scope
from tests.records.factories import body

pytestmark = pytest.mark.django_db

DOMAINS = ["support", "legal"]
TASK_TYPES = ["", "email", "phone"]
CONDITIONS = [{"region": "eu"}, {"tier": "gold"}]
MEMORY_SCOPES = [
    {
        "domain": domain,
        "task_type": task_type,
        "conditions": {k: v for part in parts for k, v in part.items()},
    }
    for domain in DOMAINS
    for task_type in TASK_TYPES
    for size in range(len(CONDITIONS) + 1)
    for parts in itertools.combinations(CONDITIONS, size)
]
SEARCH_SCOPES = st.fixed_dictionaries(
    {},
    optional={
        "domain": st.sampled_from(DOMAINS),
        "task_type": st.sampled_from(TASK_TYPES[1:]),
        "conditions": st.dictionaries(
            st.sampled_from(["region", "tier"]),
            st.sampled_from(["eu", "us", "gold"]),
            max_size=2,
        ),
    },
)


def contained(memory: dict[str, Any], search: dict[str, Any]) -> bool:
    if not (search.get("domain") or search.get("task_type") or search.get("conditions")):
        return True  # a search naming no scope searches every scope
    conditions = search.get("conditions") or {}
    return (
        ("domain" not in search or memory["domain"] == search["domain"])
        and memory["task_type"] in ("", search.get("task_type", ""))
        and all(conditions.get(k) == v for k, v in memory["conditions"].items())
    )


def exactly(memory: dict[str, Any], search: dict[str, Any]) -> bool:
    conditions = search.get("conditions") or {}
    return (
        ("domain" not in search or memory["domain"] == search["domain"])
        and ("task_type" not in search or memory["task_type"] == search["task_type"])
        and all(memory["conditions"].get(k) == v for k, v in conditions.items())
    )


def test_a_search_returns_exactly_the_memories_its_scope_contains(tenant, agent):
    by_id = {}
    for n, scope in enumerate(MEMORY_SCOPES):
        fields = {k: v for k, v in scope.items() if v}
        response = agent.post(
            "/api/v1/records", body(subject=f"user:{n}", value="carrier alpha", scope=fields)
        )
        assert response.status_code == 201, response.json()
        by_id[response.json()["id"]] = scope

    @settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(search=SEARCH_SCOPES, exact=st.booleans())
    def check(search: dict[str, Any], exact: bool) -> None:
        q = SearchQuery(
            query="carrier alpha",
            domain=search.get("domain", ""),
            task_type=search.get("task_type", ""),
            conditions=search.get("conditions") or None,
            top_k=100,
            scope_match="exact" if exact else "contained",
        )
        with tenant_scope(tenant.pk):
            result = search_scoped(tenant=tenant, q=q, actor=Actor.system("test"))
        rule = exactly if exact else contained
        assert {str(hit.pk) for hit in result.hits} == {
            pk for pk, scope in by_id.items() if rule(scope, search)
        }

    check()
