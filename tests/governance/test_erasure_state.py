"""Erasure reaches the state layer: runs (with their episodes and checkpoints) of the subject
or owner go, so do episodes and checkpoints mentioning the subject, obligations about or
mentioning the subject lose their payload, result and subject but keep their key and state
(exactly-once still holds), and verify-erasure searches these stores too, by content."""

from __future__ import annotations

import uuid

import pytest

from apps.governance.state_erasure import mentioning
from apps.state.models import Checkpoint, Episode, Obligation, Run
from apps.tenancy.context import tenant_scope
from tests.derivations.support import summarise, write
from tests.factories.state import EpisodeFactory, RunFactory

from .test_verification import verify

pytestmark = pytest.mark.django_db

ADDRESS = "12 quince lane"
ERASURES = "/api/v1/erasures"


def state_of(agent, subject="user:1", owner="user:alice"):
    run = agent.post("/api/v1/runs", {"task_id": "ship", "owner": owner, "subject": subject})
    assert run.status_code == 201, run.content
    run = run.json()
    assert run["subject"] == subject
    episode = agent.post(
        f"/api/v1/runs/{run['id']}/episodes", {"role": "user", "content": f"ship to {ADDRESS}"}
    )
    assert episode.status_code == 201, episode.content
    checkpoint = agent.post(
        f"/api/v1/runs/{run['id']}/checkpoints", {"step": 1, "state": {"address": ADDRESS}}
    )
    assert checkpoint.status_code == 201, checkpoint.content
    obligation = agent.post(
        "/api/v1/obligations",
        {
            "task_id": "ship",
            "kind": "ship",
            "key": f"ship:{subject}:1",
            "payload": {"to": ADDRESS},
            "subject": subject,
        },
    )
    assert obligation.status_code == 201, obligation.content
    obligation = obligation.json()
    assert obligation["subject"] == subject
    committed = agent.post(
        f"/api/v1/obligations/{obligation['id']}/commit", {"result": {"label": ADDRESS}}
    )
    assert committed.status_code == 200, committed.content
    return run, episode.json(), obligation


def test_erasing_a_subject_erases_its_state(admin_agent, tenant, capsys):
    write(admin_agent, subject="user:1", value=ADDRESS)
    run, episode, obligation = state_of(admin_agent)
    other_run, _, other_obligation = state_of(admin_agent, subject="user:2")
    summary = summarise(admin_agent, [], sources=[{"type": "episode", "id": episode["id"]}])
    assert summary.status_code == 201, summary.content

    response = admin_agent.post(ERASURES, {"subject": "user:1", "reason": "GDPR art. 17"})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["totals"]["runs"] == 1
    assert body["totals"]["episodes"] == 1
    assert body["totals"]["checkpoints"] == 1
    assert body["totals"]["obligations_stripped"] == 1
    assert body["receipt"]["counts"]["runs"] == 1
    assert body["receipt"]["counts"]["obligations_stripped"] == 1
    assert ADDRESS not in response.content.decode()

    assert admin_agent.get(f"/api/v1/runs/{run['id']}").status_code == 404
    assert admin_agent.get(f"/api/v1/summaries/{summary.json()['id']}").json()["valid"] is False
    with tenant_scope(tenant.pk):
        assert not Run.objects.filter(pk=run["id"]).exists()
        assert not Episode.objects.filter(run_id=run["id"]).exists()
        assert not Checkpoint.objects.filter(run_id=run["id"]).exists()
        stripped = Obligation.objects.get(pk=obligation["id"])
        assert (stripped.payload, stripped.result, stripped.state) == ({}, None, "committed")
        assert stripped.subject == ""
        assert Run.objects.filter(pk=other_run["id"]).exists()
        assert Obligation.objects.get(pk=other_obligation["id"]).payload == {"to": ADDRESS}

    # Exactly-once still holds: the key finds the obligation, a second commit is refused.
    again = admin_agent.post(
        "/api/v1/obligations",
        {"task_id": "ship", "kind": "ship", "key": "ship:user:1:1", "subject": "user:1"},
    )
    assert again.status_code == 200
    assert again.json()["id"] == obligation["id"]
    assert ADDRESS not in again.content.decode()
    recommit = admin_agent.post(f"/api/v1/obligations/{obligation['id']}/commit", {"result": 1})
    assert recommit.status_code == 409

    ok, out = verify(body["id"], capsys)
    assert ok, out


def test_erasing_an_owner_erases_its_runs(admin_agent, tenant):
    write(admin_agent, subject="user:1", owner="user:alice")
    run, _, _ = state_of(admin_agent, owner="user:alice")
    kept, _, _ = state_of(admin_agent, subject="user:2", owner="user:bob")
    body = admin_agent.post(ERASURES, {"owner": "user:alice", "reason": "offboarded"}).json()
    assert body["totals"]["runs"] == 1
    with tenant_scope(tenant.pk):
        assert not Run.objects.filter(pk=run["id"]).exists()
        assert Run.objects.filter(pk=kept["id"]).exists()


def test_a_dry_run_counts_the_state_too(admin_agent, tenant):
    run, _, _ = state_of(admin_agent)
    body = admin_agent.post(
        ERASURES, {"subject": "user:1", "reason": "asked", "dry_run": True}
    ).json()
    assert body["totals"]["runs"] == 1
    assert body["totals"]["episodes"] == 1
    assert body["totals"]["checkpoints"] == 1
    assert body["totals"]["obligations_stripped"] == 1
    assert admin_agent.get(f"/api/v1/runs/{run['id']}").status_code == 200


def test_verify_erasure_names_state_left_behind(admin_agent, tenant, capsys):
    write(admin_agent, subject="user:1")
    body = admin_agent.post(ERASURES, {"subject": "user:1", "reason": "asked"}).json()
    # What an erasure that missed the state layer would leave: a run and an obligation payload.
    state_of(admin_agent)
    ok, out = verify(body["id"], capsys)
    assert not ok
    assert "RESIDUE [runs" in out
    assert "RESIDUE [obligations" in out


SUBJECT = "user:ercc01b2"


def _untagged_state(agent):
    """A run and an obligation that never name their subject, but mention it."""
    run = agent.post("/api/v1/runs", {"task_id": "support", "owner": "service:desk"}).json()
    episodes = [
        agent.post(f"/api/v1/runs/{run['id']}/episodes", {"role": "user", "content": text})
        for text in (
            f"{SUBJECT} said: I live at 12 Elm Street",
            "user:ercc01b23 said: I live elsewhere",  # another subject: it stays
        )
    ]
    checkpoints = [
        agent.post(f"/api/v1/runs/{run['id']}/checkpoints", {"step": step, "state": state})
        for step, state in ((1, {"caller": SUBJECT.upper(), "address": "12 Elm Street"}), (2, {}))
    ]
    obligation = agent.post(
        "/api/v1/obligations",
        {"task_id": "support", "kind": "mail", "key": "mail-1", "payload": {"to": SUBJECT}},
    )
    assert all(r.status_code == 201 for r in (*episodes, *checkpoints, obligation))
    return run, [e.json() for e in episodes], [c.json() for c in checkpoints], obligation.json()


def test_erasing_a_subject_reaches_state_that_only_mentions_it(admin_agent, tenant, capsys):
    write(admin_agent, subject=SUBJECT)
    run, (_, other), (_, later), obligation = _untagged_state(admin_agent)
    _, _, tagged = state_of(admin_agent, subject=SUBJECT)

    preview = admin_agent.post(ERASURES, {"subject": SUBJECT, "reason": "asked", "dry_run": True})
    expected = {"runs": 1, "episodes": 2, "checkpoints": 2, "obligations_stripped": 2}
    assert {name: preview.json()["totals"][name] for name in expected} == expected

    body = admin_agent.post(ERASURES, {"subject": SUBJECT, "reason": "asked"}).json()
    assert {name: body["totals"][name] for name in expected} == expected
    with tenant_scope(tenant.pk):
        assert Run.objects.filter(pk=run["id"]).exists()  # the run stays, with its other traces
        assert list(Episode.objects.filter(run_id=run["id"]).values_list("pk", flat=True)) == [
            uuid.UUID(other["id"])
        ]
        assert list(Checkpoint.objects.filter(run_id=run["id"]).values_list("step", flat=True)) == [
            later["step"]
        ]
        for pk in (obligation["id"], tagged["id"]):
            stripped = Obligation.objects.get(pk=pk)
            assert (stripped.payload, stripped.result, stripped.subject) == ({}, None, "")
    ok, out = verify(body["id"], capsys)
    assert ok, out

    # What an erasure that missed a mention would leave is named.
    admin_agent.post(
        f"/api/v1/runs/{run['id']}/episodes", {"role": "tool", "content": f"({SUBJECT}) moved"}
    )
    ok, out = verify(body["id"], capsys)
    assert not ok
    assert "RESIDUE [episodes]" in out


MENTIONS = {
    "user:a.b+c said hi": True,
    "(User:A.B+C)": True,  # in any letter case
    "it was user:a.b+c.": True,  # a sentence may end after it
    '{"to": "user:a.b+c"}': True,
    "user:a.b+c: hi\nbye": True,
    "user:a.b+cd": False,  # another identifier
    "superuser:a.b+c": False,
    "user:a.b+c.5": False,
    "user:aXb+c": False,  # the dot is a dot, not any character
    "user:a.bbc": False,
}


def test_a_mention_is_the_whole_identifier_in_any_case(tenant):
    with tenant_scope(tenant.pk):
        run = RunFactory(tenant=tenant)
        episodes = {
            text: EpisodeFactory(tenant=tenant, run=run, seq=seq, content=text).pk
            for seq, text in enumerate(MENTIONS, start=1)
        }
        found = set(
            mentioning(Episode.objects.all(), ("content",), "user:a.b+c").values_list(
                "pk", flat=True
            )
        )
    assert {text for text, pk in episodes.items() if pk in found} == {
        text for text, mentions in MENTIONS.items() if mentions
    }
