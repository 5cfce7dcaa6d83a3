"""Property: writes in distinct scopes never change one another's facts, trust or conflicts.

Any interleaving of writes across scopes leaves each scope's fact exactly as the same
scope's writes alone leave it (replayed on another subject)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apps.records.models import Conflict, MemoryRecord, PromotionRequest
from apps.tenancy.context import tenant_scope

from .support import write_ok

pytestmark = pytest.mark.django_db

SCOPES = [
    {"domain": "support", "task_type": "chat", "conditions": {}},
    {"domain": "legal", "task_type": "review", "conditions": {}},
    {"domain": "commerce", "task_type": "checkout", "conditions": {"region": "eu"}},
    {"domain": "commerce", "task_type": "checkout", "conditions": {"region": "us"}},
]
WRITES = st.lists(
    st.tuples(
        st.integers(0, len(SCOPES) - 1),  # scope
        st.sampled_from(["short", "complete", "terse"]),  # value
        st.booleans(),  # written by the second agent (an independent source)
    ),
    min_size=1,
    max_size=8,
)
SUBJECTS = itertools.count()


def _apply(agents: tuple[Any, Any], subject: str, writes: list[tuple[int, str, bool]]) -> None:
    for position, (scope, value, second) in writes:
        write_ok(
            agents[second],
            subject=subject,
            key="answer.style",
            value=value,
            scope=SCOPES[scope],
            source={"kind": "interaction", "ref": f"interaction:{position}"},
            sensitivity="internal",
        )


def _state(subject: str, scope: int) -> dict[str, Any]:
    where = SCOPES[scope]
    records = MemoryRecord.objects.filter(
        subject=subject,
        scope_domain=where["domain"],
        scope_task_type=where["task_type"],
        scope_conditions=where["conditions"],
    )
    ids = list(records.values_list("pk", flat=True))
    return {
        "versions": sorted(
            records.values_list("version", "value", "trust", "status", "is_current")
        ),
        "observations": sorted(
            records.values_list("version", "observations__source_ref").exclude(
                observations__source_ref=None
            )
        ),
        "conflicts": sorted(
            Conflict.objects.filter(contender_id__in=ids).values_list(
                "current_record__version", "contender__version", "state"
            )
        ),
        "promotion_requests": PromotionRequest.objects.filter(record_id__in=ids).count(),
        "foreign_conflicts": Conflict.objects.filter(current_record_id__in=ids)
        .exclude(contender_id__in=ids)
        .count(),
    }


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(writes=WRITES)
def test_writes_in_distinct_scopes_never_touch_one_another(agent, second_agent, tenant, writes):
    agents = (agent, second_agent)
    run = next(SUBJECTS)
    numbered = list(enumerate(writes))
    _apply(agents, f"user:mixed{run}", numbered)
    for scope in {scope for scope, _value, _second in writes}:
        alone = f"user:alone{run}s{scope}"
        _apply(agents, alone, [(i, w) for i, w in numbered if w[0] == scope])
        with tenant_scope(tenant.pk):
            mixed_state = _state(f"user:mixed{run}", scope)
            alone_state = _state(alone, scope)
        assert mixed_state == alone_state, (scope, writes)
        assert mixed_state["foreign_conflicts"] == 0
