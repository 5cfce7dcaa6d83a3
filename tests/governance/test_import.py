"""``memoryconsole import``: a subject exported from one tenant comes back in another with the
same facts, versions and current values, an audit event per version continuing the target's
chain, and nothing when the file cannot be imported whole."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils.dateparse import parse_datetime

from apps.audit.selectors import audit_chain_verify
from apps.records.models import Fact, MemoryRecord
from apps.tenancy.context import tenant_scope
from tests.conftest import make_agent
from tests.records.factories import body
from tests.records.support import audit_events, row_counts

pytestmark = pytest.mark.django_db

EVERY = "read,write,review,delete,erase,audit"
SUBJECT = "user:9"


def ok(response: Any, status: int = 200) -> Any:
    assert response.status_code == status, response.content[:600]
    return response.json()


def held(agent: Any) -> dict[str, Any]:
    """The subject as its tenant shows it: each fact's current value and trust, and each
    version of its history (value, trust, status, provenance)."""
    facts = ok(agent.get("/api/v1/facts", {"subject": SUBJECT}))["results"]
    shown = {}
    for fact in facts:
        history = ok(agent.get(f"/api/v1/records/{fact['id']}/history"))["versions"]
        detail = ok(agent.get(f"/api/v1/records/{fact['id']}"))
        shown[fact["key"], fact["scope"]["domain"]] = {
            "current": (fact["value"], fact["trust"], fact["version"], fact["expires_at"]),
            "evidence": (len(detail["observations"]), len(detail["promotion_events"])),
            "versions": [
                (v["version"], v["value"], v["trust"], v["status"], v["source"], v["written_at"])
                for v in history
            ],
        }
    return shown


def written_in(tenant: Any) -> Any:
    """A subject with a confirmed fact, a corrected one in open conflict, a second scope and
    a redacted value; the export file of it."""
    agent, second = make_agent(tenant, EVERY), make_agent(tenant, EVERY, "second")
    first = ok(agent.post("/api/v1/records", body(subject=SUBJECT, key="lang", value="fa")), 201)
    request = ok(
        agent.post(f"/api/v1/records/{first['id']}/promotion-requests", {"reason": "asked"}), 201
    )
    ok(second.post(f"/api/v1/promotion-requests/{request['id']}/approve", {"reason": "yes"}))
    ok(agent.post("/api/v1/records", body(subject=SUBJECT, value="carrier_a")), 201)
    ok(agent.post("/api/v1/records", body(subject=SUBJECT, value="carrier_b")), 201)
    seen_again = body(subject=SUBJECT, value="carrier_a", source={"kind": "document", "ref": "d:1"})
    ok(second.post("/api/v1/records", seen_again), 201)  # an observation of the current value
    other_scope = body(subject=SUBJECT, value={"card": "4242"}, scope={"domain": "billing"})
    other_scope["redaction"] = {"state": "required", "fields": ["card"]}
    ok(agent.post("/api/v1/records", other_scope), 201)
    return agent


def test_an_exported_subject_comes_back_in_another_tenant(
    tenant: Any, other_tenant: Any, tmp_path: Path
) -> None:
    source = written_in(tenant)
    before = held(source)
    exported = tmp_path / "user9.jsonl"
    call_command("export", "--tenant", "acme", "--subject", SUBJECT, "--output", str(exported))

    # Exported from a tenant of this instance, its ids are taken here: refused, nothing stored.
    with pytest.raises(CommandError, match="--remap-ids"):
        call_command("import", str(exported), "--tenant", "globex")
    assert row_counts(other_tenant) == {"records": 0, "facts": 0, "observations": 0}

    call_command("import", str(exported), "--tenant", "globex", "--remap-ids")

    target = make_agent(other_tenant, EVERY, "target")
    assert held(target) == before
    conflicts = ok(target.get("/api/v1/conflicts", {"state": "open"}))["results"]
    assert [(c["current"]["value"], c["contender"]["value"]) for c in conflicts] == [
        ("carrier_a", "carrier_b")
    ]
    with tenant_scope(other_tenant.pk):
        ids = set(MemoryRecord.objects.values_list("pk", flat=True))
        assert audit_chain_verify().ok
    with tenant_scope(tenant.pk):
        assert not ids & set(MemoryRecord.objects.values_list("pk", flat=True))
    # A record.import per version, carrying the source's events about it; then the import's.
    imports = audit_events(other_tenant, "record.import")
    assert {event.object_id for event in imports} == {str(pk) for pk in ids}
    carried = [e["action"] for event in imports for e in event.data["origin"]["events"]]
    assert {"record.write", "record.promote"} <= set(carried)
    (summary,) = audit_events(other_tenant, "tenant.import")
    assert summary.data["imported"]["versions"] == len(ids) == 4
    assert "4242" not in json.dumps([event.data for event in audit_events(other_tenant)])

    # The same file again: the facts are held already.
    with pytest.raises(CommandError, match="already holds 3 of these facts"):
        call_command("import", str(exported), "--tenant", "globex", "--remap-ids")


def test_ids_are_kept_where_they_are_free_and_a_damaged_file_is_refused(
    tenant: Any, other_tenant: Any, tmp_path: Path
) -> None:
    source = written_in(tenant)
    before = held(source)
    exported = tmp_path / "user9.jsonl"
    call_command("export", "--tenant", "acme", "--subject", SUBJECT, "--output", str(exported))
    lines = exported.read_text().splitlines(keepends=True)
    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(lines[:-1]))
    with pytest.raises(CommandError, match="no end line"):
        call_command("import", str(cut), "--tenant", "globex")
    # The subject moves: erased at the source, its ids are free on this instance again.
    ok(source.post("/api/v1/erasures", {"subject": SUBJECT, "reason": "moved to globex"}))

    call_command("import", str(exported), "--tenant", "globex")

    target = make_agent(other_tenant, EVERY, "target")
    assert held(target) == before
    exported_ids = {
        v["id"]
        for line in map(json.loads, lines)
        if line["type"] == "fact"
        for v in line["versions"]
    }
    with tenant_scope(other_tenant.pk):
        assert set(map(str, MemoryRecord.objects.values_list("pk", flat=True))) == exported_ids
        created = {str(pk): at for pk, at in Fact.objects.values_list("pk", "created_at")}
        assert audit_chain_verify().ok
    facts = [line for line in map(json.loads, lines) if line["type"] == "fact"]
    assert created == {f["id"]: parse_datetime(f["created_at"]) for f in facts}
