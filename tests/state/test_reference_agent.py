"""The four tests that separate a state layer from a retrieval layer dressed as one, run with
``examples/reference_agent.py`` (on ``memoryconsole-client``) against a live server and the
fake side-effect services of ``examples/fake_services.py``.

1. kill and resume: SIGKILL at random moments (>= 20 per run), restart; final state and side
   effects equal those of an uninterrupted run, and each restarted process resumed from the
   latest checkpoint (counted in the audit trail: no step at or before it was looked at
   again, and only a step whose commit a kill prevented was acted on twice);
2. the same tool call twice: one side effect for one key, two for two keys;
3. a stale fact in the agent's context: detected through /facts/check, the current one used
   (and never a value no one has confirmed, or one in open conflict);
4. N processes race to commit one obligation: one side effect, every loser sees the winner.
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

import pytest
from memoryconsole_client import MemoryConsole

from apps.records.models import MemoryRecord
from apps.state.models import Episode, Obligation, Run
from apps.tenancy.context import tenant_scope
from examples import reference_agent
from examples.fake_services import serve_in_thread
from tests.agent_resume import (
    assert_resumed_not_replayed,
    audited_segments,
    comparable_outcome,
    opens_beyond_bound,
    performed_effects,
    replays,
    segments,
)
from tests.conftest import make_agent
from tests.factories import TenantFactory
from tests.records.factories import body as record_body

from .support import audit_events

ROOT = Path(__file__).resolve().parents[2]
AGENT = ROOT / "examples" / "reference_agent.py"
MIN_KILLS = int(os.environ.get("MEMORYCONSOLE_STATE_KILLS", "20"))


@pytest.fixture
def services():
    server = serve_in_thread()
    yield server
    server.shutdown()


@pytest.fixture
def reference_services():
    server = serve_in_thread()
    yield server
    server.shutdown()


def _env(live_server: Any, token: str, services: Any) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", ""),
        "MEMORYCONSOLE_URL": live_server.url,
        "MEMORYCONSOLE_TOKEN": token,
        "FAKE_SERVICES_URL": services.url,
    }


def _agent_command(*args: str) -> list[str]:
    return [sys.executable, str(AGENT), *args]


def _in_process_agent(live_server: Any, token: str, services: Any) -> reference_agent.Agent:
    memory = MemoryConsole(live_server.url, token)
    return reference_agent.Agent(memory, reference_agent.Services(services.url))


# --- 1. kill and resume ---------------------------------------------------------------------

KILLS_PER_INSTANCE = 4
STEPS = len(reference_agent.STEPS)


def _committed_steps(tenant: Any) -> int:
    with tenant_scope(tenant.pk):
        return Obligation.objects.filter(state="committed").count()


# A kill test (SIGKILL at each step, then a resumed run): it runs in .ci/run's fault step.
@pytest.mark.faults
def test_it_resumes_after_sigkill_from_its_checkpoint_with_the_outcome_of_an_uninterrupted_run(
    live_server, other_tenant, services, reference_services, tmp_path
):
    """One task runs once uninterrupted (the reference), then again, in fresh tenants with the
    same task id, under fire: started, SIGKILLed after a random delay, restarted, and so on
    (up to KILLS_PER_INSTANCE kills, then left to finish), until at least MIN_KILLS kills have
    landed. Every interrupted instance must end exactly like the reference: same final state,
    same side effects, each performed once; and each restart must have resumed from the
    latest checkpoint rather than replayed the task (counted by ``assert_resumed_not_replayed``)."""
    seed = int(os.environ.get("MEMORYCONSOLE_STATE_SEED", str(random.randrange(1 << 30))))
    rng = random.Random(seed)
    task = "order-1001"
    calm = make_agent(other_tenant, name="uninterrupted")
    started = time.monotonic()
    completed = subprocess.run(
        _agent_command("run", "--task-id", task),
        env=_env(live_server, calm.token, reference_services),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    duration = time.monotonic() - started
    expected = json.loads(completed.stdout)
    expected_effects = performed_effects(reference_services)
    assert len(expected_effects) == 4  # reserve, charge, receipt, ship (the fact is ours)

    kills, landed_at, mid_run_resumes = 0, [], 0
    instances = 0
    while kills < MIN_KILLS:
        instances += 1
        assert instances <= 3 * MIN_KILLS, f"kills do not land (seed {seed})"
        tenant = TenantFactory(slug=f"killed-{instances}")
        killed = make_agent(tenant, name="killed")
        auditor = make_agent(tenant, "read,state,audit", name="auditor")
        journal = tmp_path / f"journal-{instances}.jsonl"
        env = _env(live_server, killed.token, services)
        services.ledger.reset()
        for attempt in range(KILLS_PER_INSTANCE + 50):
            # The first KILLS_PER_INSTANCE attempts die; the next runs on. Half the deaths come
            # from outside, at a random moment within (about) the work left, often in the middle
            # of a request; half from inside, at a random point of the agent's HTTP traffic
            # (before sending a request, or after its answer and before acting on it).
            left = STEPS - _committed_steps(tenant)
            timeout: float = 60
            attempt_env = env
            if attempt < KILLS_PER_INSTANCE and attempt % 2:
                timeout = rng.uniform(0.1, 0.9) * duration * max(0.3, left / STEPS)
            elif attempt < KILLS_PER_INSTANCE:
                die_at = rng.randrange(0, 8 + 10 * left)
                attempt_env = {**env, "REFERENCE_AGENT_DIE_AT": str(die_at)}
            process = subprocess.Popen(
                _agent_command(
                    "--jitter-ms", "3", "--journal", str(journal), "run", "--task-id", task
                ),
                env=attempt_env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            try:
                out, err = process.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                process.send_signal(signal.SIGKILL)  # a no-op if it has just finished
                out, err = process.communicate()
            if process.returncode == -signal.SIGKILL:
                kills += 1
                how = "timer" if attempt % 2 else f"point {attempt_env['REFERENCE_AGENT_DIE_AT']}"
                landed_at.append(f"{how}: {_committed_steps(tenant)} committed")
                continue
            assert process.returncode == 0, f"seed {seed}: {err[-2000:]}"
            break
        final = json.loads(out)
        assert comparable_outcome(final) == comparable_outcome(expected), f"seed {seed}"
        # The same side effects, in the same order, each performed exactly once: retries after
        # a kill were absorbed by the idempotency keys, which is what they are for.
        assert performed_effects(services) == expected_effects, f"seed {seed}"
        with tenant_scope(tenant.pk):
            assert list(Run.objects.values_list("state", flat=True)) == ["closed"]
            assert Episode.objects.count() == 0
            states = list(Obligation.objects.values_list("state", flat=True))
            assert states == ["committed"] * STEPS
            assert MemoryRecord.objects.filter(subject=f"order:{task}").count() == 1
        assert len(audit_events(tenant, "obligation.commit")) == STEPS
        with MemoryConsole(live_server.url, auditor.token) as reader:
            found = audited_segments(reader, task, str(killed.credential.pk))
        assert_resumed_not_replayed(found, journal, services, task, f"seed {seed}")
        mid_run_resumes += sum(1 for s in found if 0 < s.resumed_from < STEPS)

    # The kills must have left work behind a checkpoint often enough for resumption (not a
    # replay from step 0, which the counts above would catch) to have been exercised.
    assert mid_run_resumes >= MIN_KILLS // 4, f"seed {seed}: {mid_run_resumes} mid-run resumes"
    print(
        f"seed {seed}: {kills} kills over {instances} instances (reference run {duration:.2f}s), "
        f"{mid_run_resumes} resumed from a checkpoint mid-run; "
        f"obligations committed at each kill: {landed_at}"
    )


# --- 2. the same tool call twice -------------------------------------------------------------


def test_it_gives_one_side_effect_per_idempotency_key(live_server, agent, services):
    client = _in_process_agent(live_server, agent.token, services)
    body = {"amount_cents": 4200}

    def charge(key: str) -> reference_agent.Performed:
        return reference_agent.perform(
            client,
            task_id="order-7",
            key=key,
            kind="charge",
            payload=body,
            act=reference_agent.side_effect(client, "payments/charge", body, key),
        )

    first = charge("order-7:1:charge")
    replay = charge("order-7:1:charge")
    assert (first.outcome, replay.outcome) == ("committed", "already_committed")
    assert replay.result == first.result
    assert replay.obligation == first.obligation
    stats = services.ledger.stats()
    # The agent consulted the ledger and did not even call the payment service again.
    assert (stats["calls"], stats["effects"]) == (1, 1)

    # Replayed below the ledger too (a crash between effect and commit): still one effect.
    reference_agent.side_effect(client, "payments/charge", body, "order-7:1:charge")()
    assert services.ledger.stats()["effects"] == 1

    other = charge("order-7:2:charge")
    assert other.outcome == "committed"
    assert other.obligation != first.obligation
    stats = services.ledger.stats()
    assert stats["effects"] == 2
    assert stats["effects_by_key"] == {"order-7:1:charge": 1, "order-7:2:charge": 1}


# --- 3. a stale fact --------------------------------------------------------------------------


def _confirm(writer: Any, reviewer: Any, record_id: str) -> None:
    """A reviewing credential confirms ``writer``'s record (what an irreversible step needs)."""
    opened = writer.post(
        f"/api/v1/records/{record_id}/promotion-requests", {"reason": "the customer said so"}
    )
    assert opened.status_code == 201, opened.content[:500]
    approved = reviewer.post(
        f"/api/v1/promotion-requests/{opened.json()['id']}/approve", {"reason": "checked"}
    )
    assert approved.status_code == 200, approved.content[:500]


def test_it_detects_a_stale_fact_and_acts_on_the_current_one(live_server, agent, tenant, services):
    reviewer = make_agent(tenant, "read,review", name="reviewer")
    old = agent.post("/api/v1/records", record_body(value="carrier_a")).json()
    _confirm(agent, reviewer, old["id"])
    new = agent.post(
        "/api/v1/records", record_body(value="carrier_b", source__ref="interaction:5000")
    ).json()
    assert new["outcome"] == "conflict"
    resolved = reviewer.post(
        f"/api/v1/conflicts/{new['conflict']}/resolve",
        {"resolution": "accept_new", "reason": "the customer changed carrier"},
    )
    assert resolved.status_code == 200, resolved.content[:500]
    _confirm(agent, reviewer, new["id"])

    # The agent's context still holds version 1, as retrieved before the change.
    context_fact = {"id": old["id"], "version": old["version"], "value": old["value"]}
    output = subprocess.run(
        _agent_command("stale", "--task-id", "order-9", "--fact", json.dumps(context_fact)),
        env=_env(live_server, agent.token, services),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    outcome = json.loads(output.stdout)
    assert outcome["stale"] is True
    assert outcome["used"] == {"id": new["id"], "version": new["version"], "value": "carrier_b"}
    [effect] = services.ledger.stats()["log"]
    assert effect["body"]["carrier"] == "carrier_b"
    assert effect["body"]["fact"] == new["id"]


def test_it_acts_on_a_current_fact_without_a_detour(live_server, agent, tenant, services):
    fact = agent.post("/api/v1/records", record_body(value="carrier_a")).json()
    _confirm(agent, make_agent(tenant, "read,review", name="reviewer"), fact["id"])
    client = _in_process_agent(live_server, agent.token, services)
    outcome = reference_agent.act_on_fact(
        client,
        task_id="order-10",
        fact={"id": fact["id"], "version": fact["version"], "value": "carrier_a"},
    )
    assert outcome["stale"] is False
    assert services.ledger.stats()["log"][0]["body"]["carrier"] == "carrier_a"


@pytest.mark.parametrize("disputed", [False, True], ids=["provisional", "in_conflict"])
def test_it_never_ships_on_a_value_no_one_has_confirmed(
    live_server, agent, tenant, services, disputed
):
    fact = agent.post("/api/v1/records", record_body(value="carrier_a")).json()
    if disputed:
        _confirm(agent, make_agent(tenant, "read,review", name="reviewer"), fact["id"])
        other = make_agent(tenant, name="other-writer")
        contender = other.post(
            "/api/v1/records", record_body(value="carrier_b", source__ref="interaction:5001")
        ).json()
        assert contender["outcome"] == "conflict"
    client = _in_process_agent(live_server, agent.token, services)
    with pytest.raises(reference_agent.StepBlocked, match="not safe to act on"):
        reference_agent.act_on_fact(
            client,
            task_id="order-11",
            fact={"id": fact["id"], "version": fact["version"], "value": "carrier_a"},
        )
    assert services.ledger.stats()["effects"] == 0


# --- 4. N agents, one obligation --------------------------------------------------------------


def test_it_lets_exactly_one_of_n_racing_agents_commit(live_server, tenant, services):
    racers = 8
    token = make_agent(tenant, name="racer").token
    env = _env(live_server, token, services)
    start_at = time.time() + 3.0
    processes = [
        subprocess.Popen(
            _agent_command(
                "race",
                "--task-id",
                "order-42",
                "--key",
                "order-42:1:charge",
                "--worker",
                f"w{n}",
                "--start-at",
                str(start_at),
            ),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(racers)
    ]
    outputs = []
    for process in processes:
        out, err = process.communicate(timeout=60)
        assert process.returncode == 0, err[-2000:]
        outputs.append(json.loads(out))

    winners = [o for o in outputs if o["outcome"] == "committed"]
    assert len(winners) == 1
    [winner] = winners
    assert winner["result"]["worker"] == winner["worker"]
    for loser in outputs:
        assert loser["result"] == winner["result"]  # every loser sees the winner's result
    losers_409 = [o for o in outputs if o["outcome"] == "lost_race"]
    assert losers_409, "no commit was refused: the race did not happen"
    assert {o["outcome"] for o in outputs} <= {"committed", "lost_race", "already_committed"}

    stats = services.ledger.stats()
    assert stats["effects"] == 1
    assert stats["effects_by_key"] == {"order-42:1:charge": 1}
    assert len(audit_events(tenant, "obligation.commit")) == 1
    assert len(audit_events(tenant, "obligation.commit_refused")) == len(losers_409)
    with tenant_scope(tenant.pk):
        obligation = Obligation.objects.get(key="order-42:1:charge")
    assert obligation.result == winner["result"]


# --- the counting itself, and the agent's only way in ----------------------------------------


def _event(seq: int, action: str, kind: str, target: str, **data: Any) -> dict[str, Any]:
    return {"seq": seq, "action": action, "object": {"type": kind, "id": target}, "data": data}


def test_the_count_tells_a_replaying_agent_from_a_resuming_one():
    """Two restarts after step 2 was checkpointed: the resuming agent opens step 3 on; the
    replaying one opens steps 1 and 2 again, which the same final state would not show."""
    steps = {"o1": 1, "o2": 2, "o3": 3}

    def trail(reopened: list[str]) -> list[dict[str, Any]]:
        first = [
            _event(1, "state.read", "run", "r", checkpoint=None, step=None),
            _event(2, "obligation.create", "obligation", "o1"),
            _event(3, "obligation.create", "obligation", "o2"),
            _event(4, "state.read", "run", "r", checkpoint="c2", step=2),
        ]
        again = [
            _event(5 + n, "state.read", "obligation", o, through="create", state="committed")
            for n, o in enumerate(reopened)
        ]
        return [*first, *again, _event(9, "obligation.create", "obligation", "o3")]

    resuming = segments(trail([]), steps, {"r"})
    replaying = segments(trail(["o1", "o2"]), steps, {"r"})
    assert [(s.resumed_from, s.opened) for s in resuming] == [(0, [1, 2]), (2, [3])]
    assert replays(resuming) == []
    assert opens_beyond_bound(resuming) == {}
    assert len(replays(replaying)) == 2
    assert opens_beyond_bound(replaying) == {1: (2, 1), 2: (2, 1)}


def test_the_agent_reaches_memory_console_only_through_the_client():
    source = AGENT.read_text()
    assert "/api/v1" not in source  # no hand-built request to the API
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.path.insert(0, 'examples'); import reference_agent; "
            "roots = {m.split('.')[0] for m in sys.modules}; "
            "print(sorted(roots & {'django', 'apps', 'rest_framework'}))",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert loaded.stdout.strip() == "[]"
