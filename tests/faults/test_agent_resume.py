"""The reference agent killed mid-task while the product's own processes die under it.

One ``memoryconsole up`` on a fresh embedded database; ``examples/reference_agent.py`` (on
``memoryconsole-client``) fulfils orders against it as a real process, with the fake
side-effect services in this process. Each order runs once uninterrupted, in a tenant of its
own (the reference), then again in another tenant under fire: the agent is SIGKILLed at
random points of its traffic or at random moments and restarted, and during some attempts
the Celery worker is SIGKILLed, or the PostgreSQL postmaster (``up`` starts it again; the API
answers 503 meanwhile, which the client waits out).

Checked by counting, for each order: the outcome and the side effects equal the reference's,
each effect performed exactly once; from the audit trail, each restarted process resumed from
the latest checkpoint (no step at or before it opened again) and only a step whose commit a
kill prevented was acted on twice (``tests/agent_resume.py``); nothing acknowledged was lost
(every checkpoint the agent was told was saved is at or below the final one, every commit it
was told of is in the ledger, the fact it wrote is readable and embedded despite the worker's
death). ``.ci/run`` runs this module as its own step (``-m faults``).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
from memoryconsole_client import MemoryConsole

from examples import reference_agent
from examples.fake_services import FakeServicesServer, serve_in_thread
from examples.reference_agent import PATIENT
from tests.agent_resume import (
    assert_resumed_not_replayed,
    audited_segments,
    comparable_outcome,
    journal_processes,
    performed_effects,
)
from tests.test_up import Up, _assert_nothing_left, _command, _env, _postmaster, running_up

pytestmark = [pytest.mark.slow, pytest.mark.faults]

ROOT = Path(__file__).resolve().parents[2]
AGENT = ROOT / "examples" / "reference_agent.py"
STEPS = len(reference_agent.STEPS)
REDELIVER_AFTER = 10
STALLED_AFTER = 15
EMBEDDED_WITHIN = 120.0
ATTEMPT_TIMEOUT = 150.0  # an attempt that rides out a database restart takes this at most
# Per order: what happens in each attempt before the one left to finish. "point": the agent
# kills itself at a random point of its HTTP traffic; "timer": it is killed at a random
# moment; "worker" / "database": the Celery worker / the postmaster is killed at a random
# moment of the attempt, and the agent is killed by a timer after it ("+ride": the agent is
# left to ride it out and finish). An attempt that finishes the order ends its schedule, so
# each product fault comes first or after a timer (which never lets the order finish).
SCHEDULES = [
    ["worker", "timer", "point", "timer", "point"],
    ["timer", "database", "timer", "point"],
    ["timer", "worker+ride"],
    ["timer", "database+ride"],
]


def _agent(up: Up, token: str, services: FakeServicesServer, *args: str, **env: str) -> Any:
    return subprocess.Popen(
        [sys.executable, str(AGENT), *args],
        env={
            "PATH": os.environ.get("PATH", ""),
            "MEMORYCONSOLE_URL": up.base,
            "MEMORYCONSOLE_TOKEN": token,
            "FAKE_SERVICES_URL": services.url,
            **env,
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _child(up: Up, word: str) -> psutil.Process:
    return next(c for c in psutil.Process(up.process.pid).children() if word in c.cmdline())


def _healthy(up: Up) -> bool:
    try:
        status, body = up.get("/api/v1/health")
    except OSError:
        return False
    return status == 200 and json.loads(body).get("database") == "ok"


def _wait(what: str, done: Any, up: Up, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            health = up.get("/api/v1/health")[1].decode(errors="replace")
            pytest.fail(f"{what} within {timeout}s; health {health}:\n{up.output()[-6000:]}")
        assert up.process.poll() is None, f"up exited:\n{up.output()[-4000:]}"
        time.sleep(0.5)


def _started(agent: Any, journal: Path) -> None:
    """Wait until the agent process has journaled its start (or has ended)."""
    deadline = time.monotonic() + ATTEMPT_TIMEOUT
    while agent.poll() is None and time.monotonic() < deadline:
        if any(
            p.pid == agent.pid and p.resumed_from is not None for p in journal_processes(journal)
        ):
            return
        time.sleep(0.01)


class Chaos:
    """Kills a process of the product in the middle of an agent's attempt."""

    def __init__(self, up: Up, home: Path) -> None:
        self.up, self.home = up, home
        self.killed: list[tuple[str, int, int]] = []  # kind, pid, agent events before

    def during(self, agent: Any, journal: Path, skip: int, kind: str) -> None:
        """Kill the worker or the postmaster while the agent process is at work: after it
        has journaled its start and then ``skip`` + 1 events (an obligation opened, a step
        acted on, committed or checkpointed). An agent that finished first (its previous
        attempt had left it nothing but closing the run) still sees the fault, recorded as
        missed."""
        deadline = time.monotonic() + 30
        while agent.poll() is None and time.monotonic() < deadline:
            mine = [p for p in journal_processes(journal) if p.pid == agent.pid]
            if mine and mine[0].resumed_from is not None and len(mine[0].events) > skip + 1:
                break
            time.sleep(0.01)
        at_work = agent.poll() is None
        victim = _child(self.up, "worker") if kind == "worker" else _postmaster(self.home)
        self.killed.append((kind if at_work else f"{kind} (missed)", victim.pid, skip))
        victim.kill()


def test_a_killed_agent_resumes_from_its_checkpoint_while_worker_and_database_die(
    tmp_path: Path,
) -> None:
    seed = int(os.environ.get("MEMORYCONSOLE_STATE_SEED", str(random.randrange(1 << 30))))
    rng = random.Random(seed)
    home = tmp_path / "home"
    tuning = {
        "MEMORYCONSOLE_OUTBOX_REDELIVER_AFTER": str(REDELIVER_AFTER),
        "MEMORYCONSOLE_WORK_STALLED_AFTER": str(STALLED_AFTER),
    }
    reference, services = serve_in_thread(), serve_in_thread()
    with running_up(home, tmp_path, workers=2, env=tuning) as up:
        up.wait_healthy()

        def mc(*argv: str) -> str:
            out = subprocess.run(
                [*_command(), *argv], env=_env(home), capture_output=True, text=True, check=True
            )
            return out.stdout.strip().splitlines()[-1]

        mc("create-tenant", "calm")
        mc("create-tenant", "agents")
        calm_token = mc("create-token", "calm", "--name", "uninterrupted")
        agent_token = mc("create-token", "agents", "--name", "agent")
        auditor_token = mc(
            "create-token", "agents", "--name", "auditor", "--actions", "read,state,audit"
        )
        with MemoryConsole(up.base, agent_token) as me:
            agent_credential = me.me()["id"]
        chaos = Chaos(up, home)
        kills, mid_run_resumes, record_ids = 0, 0, []

        for number, schedule in enumerate(SCHEDULES):
            task = f"order-{number}"
            context = f"seed {seed}, {task}"
            # The reference: the same order, uninterrupted, in a tenant of its own. Its time
            # from its start line to its end sets the timers below.
            reference.ledger.reset()
            calm_journal = tmp_path / f"reference-{task}.jsonl"
            calm = _agent(
                up, calm_token, reference, "--journal", str(calm_journal), "run", "--task-id", task
            )
            _started(calm, calm_journal)
            began = time.monotonic()
            out, err = calm.communicate(timeout=ATTEMPT_TIMEOUT)
            assert calm.returncode == 0, err[-2000:]
            per_step = (time.monotonic() - began) / STEPS
            expected, expected_effects = json.loads(out), performed_effects(reference)

            services.ledger.reset()
            journal = tmp_path / f"journal-{task}.jsonl"
            for attempt in [*schedule, "finish"]:
                left = STEPS - max(
                    (s for p in journal_processes(journal) for s in p.steps("checkpoint")),
                    default=0,
                )
                # Points 0-3 find the run and its checkpoint; a step left takes 4 (found
                # committed: open, checkpoint) to 10 (open, act, commit, trace, checkpoint);
                # closing the run takes the last 2. So every point below 4 + 4 * left + 2 is
                # reached, even with every step checkpointed already (left 0: a worker or
                # database fault can let a run get that far), and the attempt is a kill.
                die_at = {"REFERENCE_AGENT_DIE_AT": str(rng.randrange(4, 6 + 4 * left))}
                process = _agent(
                    up,
                    agent_token,
                    services,
                    "--jitter-ms",
                    "3",
                    "--journal",
                    str(journal),
                    "run",
                    "--task-id",
                    task,
                    **(die_at if attempt == "point" else {}),
                )
                timeout = ATTEMPT_TIMEOUT
                fault = attempt.removesuffix("+ride")
                if fault in ("worker", "database"):
                    chaos.during(process, journal, rng.randrange(0, 3), fault)
                if attempt in ("timer", "worker", "database"):
                    # Once it knows where it resumes, well within the work left: a timer
                    # attempt does not finish.
                    _started(process, journal)
                    timeout = rng.uniform(0.05, 0.85) * left * per_step
                try:
                    out, err = process.communicate(timeout=timeout)
                except subprocess.TimeoutExpired:
                    process.send_signal(signal.SIGKILL)  # a no-op if it has just finished
                    out, err = process.communicate()
                if process.returncode == -signal.SIGKILL:
                    kills += 1
                    continue
                assert process.returncode == 0, f"{context} ({attempt}): {err[-3000:]}"
                break
            else:
                pytest.fail(f"{context}: the agent never finished")
            final = json.loads(out)
            assert comparable_outcome(final) == comparable_outcome(expected), context
            assert performed_effects(services) == expected_effects, context
            assert all(n == 1 for n in services.ledger.stats()["effects_by_key"].values())

            with MemoryConsole(up.base, auditor_token, retry=PATIENT) as auditor:
                found = audited_segments(auditor, task, agent_credential)
                assert_resumed_not_replayed(found, journal, services, task, context)
                mid_run_resumes += sum(1 for s in found if 0 < s.resumed_from < STEPS)
                print(f"{task}: processes resumed from {[s.resumed_from for s in found]}")
                # Nothing acknowledged is lost: every checkpoint the agent was told was saved
                # is at or below the final one; every commit it was told of is in the ledger.
                [run] = auditor.runs.list(task_id=task)
                assert run["state"] == "closed", context
                latest = auditor.checkpoints.latest(run["id"])
                assert latest is not None
                assert latest["step"] == STEPS
                assert latest["state"] == final["state"]
                processes = journal_processes(journal)
                saved = [s for p in processes for s in p.steps("checkpoint")]
                assert saved, context
                assert max(saved) <= latest["step"], context
                ledger = {o["key"]: o for o in auditor.obligations.list(task_id=task)}
                assert len(ledger) == STEPS
                for p in processes:
                    for step in p.steps("committed"):
                        key = reference_agent.step_key(task, step - 1)
                        assert ledger[key]["state"] == "committed", (context, key)
                        name = reference_agent.STEPS[step - 1].name
                        assert ledger[key]["result"] == final["state"]["results"][name]
                record_ids.append(final["state"]["results"]["record"]["id"])

        hit = {kind for kind, _, _ in chaos.killed}
        assert {"worker", "database"} <= hit, f"seed {seed}: {chaos.killed}"
        assert kills >= 8, f"seed {seed}: only {kills} agent kills landed"
        assert mid_run_resumes >= 3, f"seed {seed}: {mid_run_resumes} mid-run resumes"

        # The facts the agent wrote were acknowledged while the worker died: each is there once
        # and gets its embedding (the outbox offers it to the restarted worker).
        with MemoryConsole(up.base, auditor_token, retry=PATIENT) as auditor:

            def embedded() -> bool:
                return all(auditor.records.get(r)["derived"]["embeddings"] for r in record_ids)

            _wait("every written fact embedded", embedded, up, EMBEDDED_WITHIN)
            for number in range(len(SCHEDULES)):
                facts = [
                    f
                    for f in auditor.facts.list(f"order:order-{number}")
                    if f["key"] == "order.status"
                ]
                assert len(facts) == 1
        assert _healthy(up)
        print(
            f"seed {seed}: {kills} agent kills, product kills {chaos.killed}, "
            f"{mid_run_resumes} mid-run resumes"
        )
        assert up.interrupt() == 0
    reference.shutdown()
    services.shutdown()
    _assert_nothing_left(home, up)
