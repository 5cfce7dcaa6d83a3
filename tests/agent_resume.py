"""Counting what a killed and restarted agent did, to tell resumption from replay.

An agent that replays its task from step 0 after every restart passes a test that compares
only the final state and the side effects: the ledger dedups everything it repeats. What
tells the two apart is what each process asked the server, read from the tenant's audit
trail (not from the agent's word):

* every process starts by reading its run's latest checkpoint: a ``state.read`` of the run,
  audited with the step it returned;
* every step it then looks at is an obligation opened by key: ``obligation.create`` for a new
  one, a ``state.read`` of the obligation ``through: create`` for an existing one.

So the audit events, in order, fall into segments, one per process, each beginning with the
checkpoint it resumed from; a process that resumed from checkpoint ``c`` opens no obligation
of a step ``<= c``. A request still in flight when its process was killed may land after the
next process's read, but it is for a step after the checkpoint its own process had, which is
at most the next one's, so it cannot break the rule.

``journal_processes`` reads the agent's own ``--journal`` (one line per event, pid-tagged),
which says the same from the agent's side and which the tests compare with the audit trail.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from examples import reference_agent


@dataclass
class Segment:
    """What one process opened, after resuming from checkpoint ``resumed_from``."""

    resumed_from: int
    opened: list[int] = field(default_factory=list)  # step numbers, in order


def segments(
    events: list[dict[str, Any]], step_of: dict[str, int], run_ids: set[str]
) -> list[Segment]:
    """The audit trail of one task split at each read of its run's latest checkpoint.
    ``step_of`` maps the task's obligation ids to their step number (1-based), ``run_ids``
    are its runs. Events are sorted by ``seq`` here."""
    found: list[Segment] = []
    for event in sorted(events, key=lambda e: int(e["seq"])):
        action, target, data = event["action"], event["object"], event.get("data") or {}
        checkpoint_read = "checkpoint" in data and "step" in data
        if action == "state.read" and target["id"] in run_ids and checkpoint_read:
            found.append(Segment(int(data["step"] or 0)))
            continue
        opened = action == "obligation.create" or (
            action == "state.read"
            and target["type"] == "obligation"
            and data.get("through") == "create"
        )
        if opened and target["id"] in step_of:
            if not found:  # opened before any checkpoint read: only a process from step 0
                found.append(Segment(0))
            found[-1].opened.append(step_of[target["id"]])
    return found


def replays(found: list[Segment]) -> list[str]:
    """Every open of a step at or before the checkpoint its process resumed from."""
    return [
        f"process {n} resumed from step {s.resumed_from} and opened step {step} again"
        for n, s in enumerate(found)
        for step in s.opened
        if step <= s.resumed_from
    ]


def opens_beyond_bound(found: list[Segment]) -> dict[int, tuple[int, int]]:
    """Steps opened more often than the processes that could have opened them (those that
    resumed from before the step): ``{step: (opens, processes)}``."""
    opens = Counter(step for s in found for step in s.opened)
    return {
        step: (count, sum(1 for s in found if s.resumed_from < step))
        for step, count in opens.items()
        if count > sum(1 for s in found if s.resumed_from < step)
    }


@dataclass
class JournalProcess:
    pid: int
    resumed_from: int | None = None
    events: list[dict[str, Any]] = field(default_factory=list)

    def steps(self, event: str) -> list[int]:
        return [int(e["step"]) for e in self.events if e["event"] == event]


def journal_processes(path: Path) -> list[JournalProcess]:
    """The agent's journal, by process, in the order the processes started."""
    processes: dict[int, JournalProcess] = {}
    if not path.exists():
        return []
    for line in path.read_text().splitlines():
        event = json.loads(line)
        process = processes.setdefault(int(event["pid"]), JournalProcess(int(event["pid"])))
        if event["event"] == "start":
            process.resumed_from = int(event["resumed_from"])
        process.events.append(event)
    return list(processes.values())


def audited_segments(auditor: Any, task_id: str, agent_credential: str) -> list[Segment]:
    """The segments of ``task_id``'s processes, from the audit trail as ``auditor`` (a
    ``MemoryConsole`` with the ``audit`` and ``state`` actions in the agent's tenant) reads
    it; only the agent credential's own events count (the test's reads are not the agent's).
    Obligation keys are ``<task>:<step>:<name>``."""
    step_of = {
        o["id"]: int(o["key"].split(":")[-2]) for o in auditor.obligations.list(task_id=task_id)
    }
    events = [
        e for e in auditor.audit_events.list(page_size=500) if e["actor"]["id"] == agent_credential
    ]
    run_ids = {r["id"] for r in auditor.runs.list(task_id=task_id)}
    return segments(events, step_of, run_ids)


def comparable_outcome(final: dict[str, Any]) -> dict[str, Any]:
    """The outcome of a run, minus the ids the server assigns (runs, obligations, records)."""
    results = dict(final["state"]["results"])
    results["record"] = {"version": results["record"]["version"]}
    return {"run_state": final["run_state"], "step": final["step"], "results": results}


def performed_effects(server: Any) -> list[tuple[Any, ...]]:
    stats = server.ledger.stats()
    return [(e["key"], e["service"], e["operation"], json.dumps(e["body"])) for e in stats["log"]]


def assert_resumed_not_replayed(
    found: list[Segment], journal: Path, services: Any, task: str, context: str
) -> None:
    """What each process did, counted: from the audit trail, no process looked at a step at
    or before the checkpoint it resumed from; from the journal (which must agree), a step was
    acted on again only after a process died between acting and committing it, and the
    outside world was called no more often than the agent acted."""
    assert replays(found) == [], context
    assert opens_beyond_bound(found) == {}, context
    processes = journal_processes(journal)
    started = [p.resumed_from for p in processes if p.resumed_from is not None]
    audited = iter(s.resumed_from for s in found)
    # Each journaled start matches an audited checkpoint read, in order (a process killed
    # between the read and its journal line leaves a read alone).
    assert all(any(step == read for read in audited) for step in started), (context, started)
    calls = services.ledger.stats()["calls_by_key"]
    for index in range(len(reference_agent.STEPS)):
        step, key = index + 1, reference_agent.step_key(task, index)
        acting = [p for p in processes if step in p.steps("act")]
        assert acting, f"{context}: step {step} was never acted on"
        for earlier in acting[:-1]:
            assert step not in earlier.steps("committed"), (
                f"{context}: step {step} acted on again after process {earlier.pid} committed it"
            )
        if reference_agent.STEPS[index].target != "memory":
            assert calls.get(key, 0) <= len(acting), (context, key, calls)
    for process in processes:
        if process.resumed_from is None:
            assert process.steps("open") == [], context  # killed before it knew where it was
        else:
            assert all(s > process.resumed_from for s in process.steps("open")), context
