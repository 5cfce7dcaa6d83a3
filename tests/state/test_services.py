"""The state services called directly, as the console and tasks call them: their rules,
their audit events, and what concurrent callers see."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from apps.core.actors import Actor
from apps.state import selectors, services
from apps.state.models import Checkpoint, Episode, Obligation, Run
from apps.tenancy.context import tenant_scope

from .support import audit_events

AGENT = Actor(type="credential", id="c-1", label="agent one")
OTHER = Actor(type="credential", id="c-2", label="agent two")


def _in(tenant: Any, call: Callable[[], Any]) -> Any:
    with tenant_scope(tenant.pk):
        return call()


def _run(tenant: Any, task_id: str = "task-1") -> Run:
    return _in(
        tenant,
        lambda: services.run_open(tenant=tenant, task_id=task_id, owner="user:a", actor=AGENT),
    )


def _obligation(tenant: Any, key: str, **fields: Any) -> Obligation:
    def create() -> Obligation:
        return services.obligation_create(
            tenant=tenant, task_id="task-1", kind="charge", key=key, actor=AGENT, **fields
        ).obligation

    return _in(tenant, create)


def _commit(tenant: Any, obligation: Obligation, result: Any, actor: Actor = AGENT) -> Any:
    return _in(
        tenant,
        lambda: services.obligation_commit(obligation=obligation, result=result, actor=actor),
    )


@pytest.mark.django_db
class TestRuns:
    def test_it_numbers_episodes_and_audits_without_content(self, tenant):
        run = _run(tenant)
        for text in ("first", "second"):
            _in(
                tenant,
                lambda text=text: services.episode_append(
                    run=run, role="user", content=text, actor=AGENT
                ),
            )
        assert _in(tenant, lambda: list(Episode.objects.values_list("seq", flat=True))) == [1, 2]
        events = audit_events(tenant, "episode.append")
        assert [e.data["seq"] for e in events] == [1, 2]
        assert all("first" not in str(e.data) for e in events)

    def test_it_keeps_checkpoints_when_closing(self, tenant):
        run = _run(tenant)
        _in(tenant, lambda: services.checkpoint_write(run=run, step=1, state={}, actor=AGENT))
        _in(
            tenant,
            lambda: services.episode_append(run=run, role="tool", content_ref="x", actor=AGENT),
        )
        closed = _in(tenant, lambda: services.run_close(run=run, actor=OTHER))
        assert (closed.state, closed.episodes_discarded) == ("closed", 1)
        assert closed.closed_by_id == "c-2"
        assert _in(tenant, Checkpoint.objects.count) == 1
        assert _in(tenant, Episode.objects.count) == 0

    def test_it_refuses_a_checkpoint_behind_the_latest(self, tenant):
        run = _run(tenant)
        outcome = _in(
            tenant, lambda: services.checkpoint_write(run=run, step=4, state=[1], actor=AGENT)
        )
        assert outcome.created
        with pytest.raises(services.CheckpointConflict) as refused:
            _in(tenant, lambda: services.checkpoint_write(run=run, step=3, state=[], actor=AGENT))
        assert refused.value.extra == {"latest_step": 4}
        again = _in(
            tenant, lambda: services.checkpoint_write(run=run, step=4, state=[1], actor=AGENT)
        )
        assert (again.created, again.checkpoint.pk) == (False, outcome.checkpoint.pk)
        assert len(audit_events(tenant, "checkpoint.write")) == 1


@pytest.mark.django_db
class TestObligations:
    def test_it_returns_the_existing_obligation_for_a_key_and_names_differences(self, tenant):
        first = _obligation(tenant, "k", payload={"a": 1})
        outcome = _in(
            tenant,
            lambda: services.obligation_create(
                tenant=tenant, task_id="other", kind="email", key="k", actor=OTHER
            ),
        )
        assert not outcome.created
        assert outcome.obligation.pk == first.pk
        assert outcome.mismatched == ["task_id", "kind", "payload"]
        [read] = audit_events(tenant, "state.read")
        assert read.data["mismatched"] == ["task_id", "kind", "payload"]

    def test_it_refuses_unknown_dependencies(self, tenant, other_tenant):
        foreign = _obligation(other_tenant, "theirs")
        with pytest.raises(services.UnknownDependencies) as refused:
            _obligation(tenant, "mine", depends_on=[foreign.pk])
        assert refused.value.status == 422
        assert refused.value.extra == {"unknown": [str(foreign.pk)]}
        assert _in(tenant, Obligation.objects.count) == 0

    def test_it_commits_once_and_audits_both_outcomes(self, tenant):
        obligation = _obligation(tenant, "k")
        won = _commit(tenant, obligation, {"n": 1})
        lost = _commit(tenant, obligation, {"n": 2}, actor=OTHER)
        assert (won.committed, lost.committed) == (True, False)
        assert lost.refusal == "already_committed"
        assert lost.obligation.result == {"n": 1}
        assert lost.obligation.committed_by_id == "c-1"
        assert [e.action for e in audit_events(tenant)[-2:]] == [
            "obligation.commit",
            "obligation.commit_refused",
        ]

    def test_it_orders_commits_by_dependency(self, tenant):
        charge = _obligation(tenant, "charge")
        email = _obligation(tenant, "email", depends_on=[charge.pk, charge.pk])
        assert email.depends_on == [charge.pk]
        blocked = _commit(tenant, email, None)
        assert blocked.refusal == "dependencies"
        assert [o.pk for o in blocked.pending_dependencies] == [charge.pk]
        _commit(tenant, charge, None)
        assert _commit(tenant, email, None).committed

    def test_it_lists_overdue_obligations(self, tenant):
        now = timezone.now()
        late = _obligation(tenant, "late", deadline=now - timedelta(minutes=1))
        early = _obligation(tenant, "early", deadline=now + timedelta(minutes=1))
        _obligation(tenant, "whenever")
        done = _obligation(tenant, "done", deadline=now - timedelta(minutes=1))
        _commit(tenant, done, None)
        assert _in(tenant, lambda: list(selectors.obligations_overdue())) == [late]
        later = now + timedelta(hours=1)
        assert _in(tenant, lambda: list(selectors.obligations_overdue(later))) == [late, early]

    def test_it_cannot_fail_a_committed_obligation(self, tenant):
        obligation = _obligation(tenant, "k")
        _commit(tenant, obligation, {"ok": True})
        with pytest.raises(services.ObligationNotPending) as refused:
            _in(
                tenant,
                lambda: services.obligation_fail(obligation=obligation, reason="x", actor=AGENT),
            )
        assert refused.value.extra["result"] == {"ok": True}


# --- concurrency: real transactions on separate connections -----------------------------------


def _in_threads(count: int, work: Callable[[int], Any]) -> list[Any]:
    """Run ``work(i)`` on ``count`` threads at once, each with its own database connection."""
    barrier = threading.Barrier(count)
    results: list[Any] = [None] * count

    def target(index: int) -> None:
        try:
            barrier.wait()
            results[index] = work(index)
        except Exception as error:  # reported below, not lost in the thread
            results[index] = error
        finally:
            connection.close()

    threads = [threading.Thread(target=target, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return results


@pytest.mark.django_db(transaction=True)
def test_it_serialises_concurrent_commits_of_one_obligation(tenant):
    obligation = _obligation(tenant, "hot")
    outcomes = _in_threads(
        8,
        lambda i: _commit(tenant, obligation, {"by": i}, Actor("credential", f"c{i}", f"a{i}")),
    )
    assert not [o for o in outcomes if isinstance(o, Exception)], outcomes
    winners = [o for o in outcomes if o.committed]
    assert len(winners) == 1
    [winner] = winners
    for loser in outcomes:
        if loser is not winner:
            assert loser.refusal == "already_committed"
            assert loser.obligation.result == winner.obligation.result
            assert loser.obligation.committed_at == winner.obligation.committed_at
    assert len(audit_events(tenant, "obligation.commit")) == 1
    assert len(audit_events(tenant, "obligation.commit_refused")) == 7


@pytest.mark.django_db(transaction=True)
def test_it_creates_one_obligation_for_concurrent_creates_of_a_key(tenant):
    outcomes = _in_threads(
        6,
        lambda i: _in(
            tenant,
            lambda: services.obligation_create(
                tenant=tenant, task_id="t", kind="k", key="same", actor=AGENT
            ),
        ),
    )
    assert not [o for o in outcomes if isinstance(o, Exception)], outcomes
    assert len({o.obligation.pk for o in outcomes}) == 1
    assert sum(o.created for o in outcomes) == 1
    assert _in(tenant, Obligation.objects.count) == 1


@pytest.mark.django_db(transaction=True)
def test_it_numbers_concurrent_episodes_without_gaps_or_duplicates(tenant):
    run = _run(tenant)
    outcomes = _in_threads(
        6,
        lambda i: _in(
            tenant,
            lambda: services.episode_append(run=run, role="tool", content=str(i), actor=AGENT),
        ),
    )
    assert sorted(o.seq for o in outcomes) == [1, 2, 3, 4, 5, 6]
