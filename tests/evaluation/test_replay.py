"""``memoryconsole evaluate --tenant SLUG --replay``: a tenant's decision searches of a
period, replayed on today's memory without their question."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from apps.audit.models import AuditEvent
from apps.audit.services import audit_record
from apps.core.actors import Actor
from apps.evaluation.replay import replay_summary
from apps.records.models import Conflict, MemoryRecord
from apps.review.services import conflict_resolve
from apps.tenancy.context import tenant_scope
from tests.records.factories import body

from .support import REVIEWER, remember

pytestmark = pytest.mark.django_db

QUERY = "which carrier for the preference"


def decide_on(agent: Any, key: str) -> list[str]:
    """A decision search for ``user:1``'s ``key`` in the memories' scope."""
    response = agent.post(
        "/api/v1/search",
        {
            "query": QUERY,
            "purpose": "decision",
            "scope": body()["scope"],
            "subject": "user:1",
            "keys": [key],
        },
    )
    assert response.status_code == 200, response.content
    return [hit["record"]["id"] for hit in response.json()["results"]]


def parse(raw: str) -> Any:
    moment = parse_datetime(raw)
    assert moment is not None
    return moment


def replay(tenant: Any, capsys: Any, **options: Any) -> tuple[str, str]:
    call_command("evaluate", tenant=tenant.slug, replay=True, **options)
    printed = capsys.readouterr()
    return printed.out, printed.err


def test_it_counts_each_reason_a_decision_would_now_differ(
    writer: Any, tenant: Any, tmp_path: Path, capsys: Any
) -> None:
    ids = {
        kind: remember(writer, tenant, f"{kind}.preference")
        for kind in ("deleted", "superseded", "expired", "conflict", "kept")
    }
    for kind, record in ids.items():
        assert decide_on(writer, f"{kind}.preference") == [record]
    assert decide_on(writer, "new.preference") == []  # nothing to decide on yet
    with tenant_scope(tenant.pk):
        event = AuditEvent.objects.filter(action="search.decision").order_by("-seq").first()
        assert event is not None
        # The filters are kept, the question is not.
        assert event.data["filters"]["keys"] == ["new.preference"]
        assert event.data["filters"]["subject"] == "user:1"
        assert QUERY not in json.dumps(event.data)
        # A search audited before its event kept the filters: its memories' fates only.
        audit_record(
            tenant=tenant,
            actor=Actor.system("an older release"),
            action="search.decision",
            object_type="search",
            data={"returned": [ids["kept"]], "plan": "exact"},
        )

    assert writer.delete(f"/api/v1/records/{ids['deleted']}").status_code == 200
    newer = writer.post(
        "/api/v1/records", body(key="superseded.preference", subject="user:1", value="carrier_b")
    ).json()
    with tenant_scope(tenant.pk):
        # The newer version is current now: "superseded", never a new memory as well.
        conflict_resolve(
            conflict=Conflict.objects.get(pk=newer["conflict"]),
            actor=REVIEWER,
            resolution="accept_new",
            reason="newer holds",
        )
        # Its lifetime ends now, after the decision.
        MemoryRecord.objects.filter(pk=ids["expired"]).update(expires_at=timezone.now())
    contender = writer.post(
        "/api/v1/records", body(key="conflict.preference", subject="user:1", value="carrier_z")
    ).json()
    assert contender["conflict"]  # open: the current value holds, disputed
    # New memories: in the decision's scope, in a more general scope that contains it (the
    # search's containment rule), and in another domain (never a candidate).
    new_here = remember(writer, tenant, "new.preference")
    new_general = remember(writer, tenant, "new.preference", scope={"domain": "commerce"})
    remember(writer, tenant, "new.preference", scope={"domain": "travel"})

    out_json = tmp_path / "replay.json"
    out, err = replay(tenant, capsys, json=out_json)
    assert "replaying the decision searches of acme" in err
    assert "decisions replayed: 7" in out
    assert "would now return something different: 5" in out
    assert "unchanged: 2" in out
    assert "question of a decision search is not kept" in out
    assert "may now rank" in out

    results = json.loads(out_json.read_text())
    assert (results["decisions"], results["changed"], results["unchanged"]) == (7, 5, 2)
    assert results["filters_unrecorded"] == 1
    assert results["reasons"] == {
        "new_memory": {"decisions": 1, "memories": 2},
        "superseded": {"decisions": 1, "memories": 1},
        "redacted": {"decisions": 0, "memories": 0},
        "deleted": {"decisions": 1, "memories": 1},
        "expired": {"decisions": 1, "memories": 1},
        "in_conflict": {"decisions": 1, "memories": 1},
        "unconfirmed": {"decisions": 0, "memories": 0},
    }
    by_reason = {tuple(d["reasons"]): d for d in results["changed_decisions"]}
    assert set(by_reason) == {
        ("new_memory",),
        ("superseded",),
        ("deleted",),
        ("expired",),
        ("in_conflict",),
    }
    assert by_reason[("deleted",)]["changed"] == {ids["deleted"]: ["deleted"]}
    assert sorted(by_reason[("new_memory",)]["new_candidate_ids"]) == sorted(
        [new_here, new_general]
    )
    assert by_reason[("new_memory",)]["returned"] == 0
    # Read a few decisions at a time, the two readers of the audit log stay in step.
    since, until = results["since"], results["until"]
    with tenant_scope(tenant.pk):
        paged = replay_summary(since=parse(since), until=parse(until), batch=2)
    assert (paged.decisions, paged.changed, paged.reasons) == (7, 5, results["reasons"])


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"tenant": "nope", "replay": True}, "No tenant 'nope'"),
        ({"tenant": "acme", "replay": True, "since": "yesterday"}, "neither an RFC 3339"),
        ({"tenant": "acme", "replay": True, "since": "2026-01-01T00:00:00"}, "has no zone"),
        ({"tenant": "acme", "replay": True, "since": "P1D", "until": "P2D"}, "period is empty"),
        ({"replay": True}, "needs --tenant"),
        ({"tenant": "acme", "since": "P1D"}, "go with --replay"),
        ({"tenant": "acme", "replay": True, "against": "cache"}, "do not go with --replay"),
    ],
)
def test_an_unknown_tenant_or_bad_period_is_one_line_and_exit_2(
    tenant: Any, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(CommandError, match=message) as refused:
        call_command("evaluate", **options)
    assert refused.value.returncode == 2
    assert "\n" not in str(refused.value)


def test_a_period_of_no_decision_counts_none(writer: Any, tenant: Any, capsys: Any) -> None:
    remember(writer, tenant, "kept.preference")
    decide_on(writer, "kept.preference")
    out, _ = replay(tenant, capsys, since="P30D", until="P1D")
    assert "decisions replayed: 0" in out
    out, _ = replay(tenant, capsys)  # the last 30 days, now included
    assert "decisions replayed: 1" in out
    assert "unchanged: 1" in out
