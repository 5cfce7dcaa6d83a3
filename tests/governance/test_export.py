"""A subject's export (``GET /api/v1/subjects/{subject}/export``, ``memoryconsole export``):
everything the tenant holds about the subject, as ``memoryconsole.export/1`` JSON Lines, and
nothing of anyone else's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from apps.governance.export import SCHEMA
from tests.conftest import make_agent
from tests.derivations.support import summarise, write
from tests.state.support import OBLIGATIONS, RUNS, ok

pytestmark = pytest.mark.django_db

EVERY = "read,write,state,delete,audit"


def export_url(subject: str) -> str:
    return f"/api/v1/subjects/{subject}/export"


def lines(response: Any) -> list[dict[str, Any]]:
    assert response.status_code == 200, response.content[:800]
    assert response["Content-Type"] == "application/x-ndjson"
    raw = b"".join(response.streaming_content).decode()
    assert raw.endswith("\n")
    return [json.loads(line) for line in raw.splitlines()]


def by_type(exported: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [line for line in exported if line["type"] == kind]


def held_about(agent: Any, subject: str) -> dict[str, Any]:
    """Two versions of a fact (a correction), a summary, a run with an episode and an
    obligation about ``subject``, and a deleted fact of it."""
    first = write(agent, subject=subject, value="carrier_a")
    second = write(agent, status=201, subject=subject, value="carrier_b")
    summary = ok(summarise(agent, [first["id"]], text="prefers carrier a"), 201)
    run = ok(agent.post(RUNS, {"task_id": "t-1", "owner": "service:x", "subject": subject}), 201)
    ok(agent.post(f"{RUNS}/{run['id']}/episodes", {"role": "user", "content": "hello"}), 201)
    obligation = ok(
        agent.post(
            OBLIGATIONS, {"task_id": "t-1", "kind": "ship", "key": "t-1:1", "subject": subject}
        ),
        201,
    )
    gone = write(agent, subject=subject, key="contact.email", value="a@example.com")
    ok(agent.delete(f"/api/v1/records/{gone['id']}"))
    return {
        "versions": {first["id"], second["id"]},
        "summary": summary["id"],
        "run": run["id"],
        "obligation": obligation["id"],
        "gone": gone["id"],
    }


def test_it_exports_everything_held_about_a_subject(tenant: Any) -> None:
    agent = make_agent(tenant, EVERY)
    held = held_about(agent, "user:9")
    write(agent, subject="user:10", value="not theirs")

    exported = lines(agent.get(export_url("User:9")))  # subjects compare case-folded

    header, *body, end = exported
    assert (header["type"], header["schema"]) == ("header", SCHEMA)
    assert (header["tenant"], header["subject"]) == ("acme", "user:9")
    (fact,) = by_type(exported, "fact")
    assert fact["subject"] == "user:9"
    assert {v["id"] for v in fact["versions"]} == held["versions"]
    version = fact["versions"][0]
    assert (version["source"]["ref"], version["owner"]) == ("interaction:4821", "user:alice")
    assert version["reason"] == "applied in checkout flow"
    assert version["scope"]["domain"] == "commerce"
    assert version["trust"] == "provisional"
    assert version["retention"]["basis"] == "contract"
    assert version["expires_at"]
    assert len(fact["conflicts"]) == 1  # the correction opened one
    assert [s["id"] for s in by_type(exported, "summary")] == [held["summary"]]
    (run,) = by_type(exported, "run")
    assert (run["id"], [e["content"] for e in run["episodes"]]) == (held["run"], ["hello"])
    assert [o["id"] for o in by_type(exported, "obligation")] == [held["obligation"]]
    (receipt,) = by_type(exported, "deletion_receipt")
    assert receipt["records"] == [held["gone"]]
    events = by_type(exported, "audit_event")
    about = {e["object"]["id"] for e in events}
    assert held["versions"] <= about
    assert {held["run"], held["obligation"], held["gone"]} <= about
    assert "episode.append" in {e["action"] for e in events}
    assert [e["seq"] for e in events] == sorted(e["seq"] for e in events)
    # The deleted fact's content is gone; the other subject was never part of it.
    text = json.dumps(body)
    assert "a@example.com" not in text
    assert "not theirs" not in text
    assert end == {
        "type": "end",
        "counts": {
            "audit_event": len(events),
            "deletion_receipt": 1,
            "fact": 1,
            "obligation": 1,
            "record": 2,
            "run": 1,
            "summary": 1,
        },
    }


@pytest.mark.django_db(transaction=True)
def test_another_tenants_subject_yields_nothing_of_theirs(tenant: Any, other_tenant: Any) -> None:
    # Transactional: the stream is read after the request's transaction, as in production.
    ours, theirs = make_agent(tenant, EVERY), make_agent(other_tenant, EVERY, "rival")
    write(theirs, subject="user:9", value="their secret")
    write(ours, subject="user:9", value="ours")

    exported = lines(ours.get(export_url("user:9")))
    assert [v["value"] for v in by_type(exported, "fact")[0]["versions"]] == ["ours"]
    assert "their secret" not in json.dumps(exported)
    assert exported[-1]["counts"]["fact"] == 1

    # A subject held only by the other tenant: the header and zero counts.
    write(theirs, subject="user:77", value="only theirs")
    header, end = lines(ours.get(export_url("user:77")))
    assert (header["type"], end) == ("header", {"type": "end", "counts": {}})


def test_it_needs_the_audit_action(tenant: Any) -> None:
    response = make_agent(tenant).get(export_url("user:9"))
    assert response.status_code == 403
    assert response["Content-Type"] == "application/problem+json"


def test_a_malformed_subject_is_a_400_naming_it(tenant: Any) -> None:
    response = make_agent(tenant, EVERY).get(export_url("not a subject"))
    assert response.status_code == 400
    assert list(response.json()["errors"]) == ["subject"]


def test_the_command_writes_a_new_file_whole(tenant: Any, tmp_path: Path) -> None:
    agent = make_agent(tenant, EVERY)
    write(agent, subject="user:9", value="carrier_a")
    write(agent, subject="user:10", value="carrier_b")
    output = tmp_path / "acme.jsonl"

    call_command("export", "--tenant", "acme", "--output", str(output))
    everyone = [json.loads(line) for line in output.read_text().splitlines()]
    assert sorted(f["subject"] for f in by_type(everyone, "fact")) == ["user:10", "user:9"]
    assert everyone[0]["subject"] is None
    assert output.stat().st_mode & 0o077 == 0  # personal data: the owner's alone
    assert [p.name for p in tmp_path.iterdir()] == ["acme.jsonl"]  # no temporary left

    with pytest.raises(CommandError, match="exists"):
        call_command("export", "--tenant", "acme", "--output", str(output))


def test_the_command_exports_one_subject_to_stdout(
    tenant: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    write(make_agent(tenant, EVERY), subject="user:9", value="carrier_a")
    call_command("export", "--tenant", "acme", "--subject", "user:9")
    out, err = capsys.readouterr()
    exported = [json.loads(line) for line in out.splitlines()]
    assert [line["type"] for line in exported][:2] == ["header", "fact"]
    assert "exported 1 fact" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--tenant", "nope"], "no tenant 'nope'"),
        (["--tenant", "acme", "--subject", "no subject"], "Use kind:identifier"),
    ],
)
def test_the_command_refuses_bad_input_in_one_line(
    tenant: Any, argv: list[str], message: str
) -> None:
    with pytest.raises(CommandError, match=message):
        call_command("export", *argv)
