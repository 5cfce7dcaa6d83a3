"""GET /api/v1/audit-events and /api/v1/audit-events/{id} (the ``audit`` action)."""

from __future__ import annotations

import base64
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
from django.utils import timezone

from apps.audit.models import AuditEvent
from apps.audit.services import audit_record
from apps.core.actors import Actor
from apps.tenancy.context import tenant_scope
from tests.conftest import make_agent

from .support import assert_problem

pytestmark = pytest.mark.django_db

EVENTS = "/api/v1/audit-events"


def _record(tenant, action="thing.touch", object_id="obj-1", actor=None, data=None):
    with tenant_scope(tenant.pk):
        return audit_record(
            tenant=tenant,
            actor=actor or Actor.system("tests"),
            action=action,
            object_type="thing",
            object_id=object_id,
            data=data or {},
        )


def _all_events(tenant):
    with tenant_scope(tenant.pk):
        return list(AuditEvent.objects.order_by("-seq"))


def test_it_needs_the_audit_action(agent):
    body = assert_problem(agent.get(EVENTS), 403)
    assert "'audit'" in body["detail"]
    assert_problem(agent.get(f"{EVENTS}/{_all_events(agent.tenant)[0].pk}"), 403)


def test_it_needs_a_credential():
    from django.test import Client

    assert_problem(Client().get(EVENTS), 401)


def test_it_lists_the_tenants_events_newest_first(tenant, other_tenant, auditing_agent):
    _record(other_tenant, action="foreign.event")
    response = auditing_agent.get(EVENTS)
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    results = response.json()["results"]
    assert [e["id"] for e in results] == [str(e.pk) for e in _all_events(tenant)]
    assert "foreign.event" not in {e["action"] for e in results}
    seqs = [e["seq"] for e in results]
    assert seqs == sorted(seqs, reverse=True)


def test_it_shows_an_events_fields(tenant, auditing_agent):
    event = _record(tenant, action="thing.create", object_id="t-9", data={"n": 3})
    shown = auditing_agent.get(EVENTS).json()["results"][0]
    assert shown == {
        "id": str(event.pk),
        "seq": event.seq,
        "occurred_at": shown["occurred_at"],
        "action": "thing.create",
        "actor": {"type": "system", "id": "", "label": "tests"},
        "object": {"type": "thing", "id": "t-9"},
        "digest": "",
        "data": {"n": 3},
        "prev_hash": event.prev_hash,
        "hash": event.hash,
    }


def test_it_filters_by_record(tenant, auditing_agent):
    _record(tenant, object_id="r-1")
    _record(tenant, object_id="r-2")
    _record(tenant, object_id="r-1", action="thing.again")
    results = auditing_agent.get(EVENTS, {"record": "r-1"}).json()["results"]
    assert [e["action"] for e in results] == ["thing.again", "thing.touch"]
    assert {e["object"]["id"] for e in results} == {"r-1"}


def test_it_filters_by_action(tenant, auditing_agent):
    _record(tenant, action="thing.a")
    _record(tenant, action="thing.b")
    results = auditing_agent.get(EVENTS, {"action": "thing.b"}).json()["results"]
    assert [e["action"] for e in results] == ["thing.b"]


def test_it_filters_by_actor_id_or_label(tenant, auditing_agent):
    bot = make_agent(tenant, name="writer-bot")
    _record(tenant, action="by.bot", actor=Actor.for_credential(bot.credential))
    _record(tenant, action="by.system")
    by_id = auditing_agent.get(EVENTS, {"actor": str(bot.credential.pk)}).json()["results"]
    by_label = auditing_agent.get(EVENTS, {"actor": "writer-bot"}).json()["results"]
    assert [e["action"] for e in by_id] == ["by.bot"]
    assert by_label == by_id


def test_it_filters_by_since(tenant, auditing_agent):
    later = _record(tenant, action="thing.later")
    since = later.occurred_at.isoformat()
    results = auditing_agent.get(EVENTS, {"since": since}).json()["results"]
    assert [e["action"] for e in results] == ["thing.later"]
    future = (timezone.now() + timedelta(days=1)).isoformat()
    assert auditing_agent.get(EVENTS, {"since": future}).json()["results"] == []
    everything = auditing_agent.get(EVENTS, {"since": "2000-01-01T00:00:00Z"}).json()
    assert len(everything["results"]) == len(_all_events(tenant))


def test_it_combines_filters(tenant, auditing_agent):
    _record(tenant, action="thing.a", object_id="x")
    _record(tenant, action="thing.b", object_id="x")
    _record(tenant, action="thing.a", object_id="y")
    results = auditing_agent.get(EVENTS, {"action": "thing.a", "record": "x"}).json()["results"]
    assert [(e["action"], e["object"]["id"]) for e in results] == [("thing.a", "x")]


def test_it_refuses_empty_filters_rather_than_listing_everything(auditing_agent):
    # An empty filter is most likely an unset variable: it names the parameter instead of
    # answering as if it had not been given.
    body = assert_problem(
        auditing_agent.get(EVENTS, {"record": "", "action": "", "actor": ""}), 400
    )
    assert set(body["errors"]) == {"record", "action", "actor"}


@pytest.mark.parametrize(
    "since",
    [
        "yesterday",
        "2025-01-14T09:12:00",  # no zone
        "2025-13-45T00:00:00Z",
        "2025-01-14T09:12:00+99:00",
        "2025-01-14",
        "0",
        "\x00",
    ],
)
def test_it_refuses_a_bad_since_naming_the_field(auditing_agent, since):
    body = assert_problem(auditing_agent.get(EVENTS, {"since": since}), 400)
    assert list(body["errors"]) == ["since"]
    assert "since" in body["detail"]


def test_it_paginates_with_a_cursor(tenant, auditing_agent):
    for n in range(7):
        _record(tenant, action=f"thing.{n}")
    expected = [e.seq for e in _all_events(tenant)]
    seen: list[int] = []
    url, params = EVENTS, {"page_size": "3"}
    pages = 0
    while url:
        page = auditing_agent.get(url, params).json()
        seen.extend(e["seq"] for e in page["results"])
        assert len(page["results"]) <= 3
        url, params = page["next"], None
        pages += 1
    assert seen == expected
    assert pages == -(-len(expected) // 3)


def test_it_goes_back_with_the_previous_link(tenant, auditing_agent):
    for n in range(5):
        _record(tenant, action=f"thing.{n}")
    first = auditing_agent.get(EVENTS, {"page_size": "2"}).json()
    assert first["previous"] is None
    second = auditing_agent.get(first["next"]).json()
    back = auditing_agent.get(second["previous"]).json()
    assert back["results"] == first["results"]


def test_it_keeps_filters_across_pages(tenant, auditing_agent):
    for n in range(5):
        _record(tenant, action="thing.paged", object_id=f"p-{n}")
        _record(tenant, action="thing.other")
    first = auditing_agent.get(EVENTS, {"action": "thing.paged", "page_size": "2"}).json()
    parsed = parse_qs(urlsplit(first["next"]).query)
    assert parsed["action"] == ["thing.paged"]
    second = auditing_agent.get(first["next"]).json()
    assert {e["action"] for e in second["results"]} == {"thing.paged"}


@pytest.mark.parametrize(
    "cursor",
    [
        "garbage",
        base64.b64encode(b"p=not-a-number").decode(),
        base64.b64encode(b"o=-5").decode(),
        base64.b64encode(b"r=x").decode(),
        "%00",
    ],
)
def test_it_refuses_a_cursor_it_did_not_issue(auditing_agent, cursor):
    body = assert_problem(auditing_agent.get(EVENTS, {"cursor": cursor}), 400)
    assert list(body["errors"]) == ["cursor"]


@pytest.mark.parametrize("size", ["0", "-1", "abc", "100000", "5.0", " 5"])
def test_it_refuses_a_page_size_out_of_range_or_not_a_number(auditing_agent, size):
    body = assert_problem(auditing_agent.get(EVENTS, {"page_size": size}), 400)
    assert list(body["errors"]) == ["page_size"]


def test_it_takes_a_page_size_up_to_500(auditing_agent):
    for size in ["1", "500"]:
        assert auditing_agent.get(EVENTS, {"page_size": size}).status_code == 200


def test_it_shows_one_event(tenant, auditing_agent):
    event = _record(tenant, action="thing.one", object_id="one")
    response = auditing_agent.get(f"{EVENTS}/{event.pk}")
    assert response.status_code == 200
    body = response.json()
    assert body["id"] == str(event.pk)
    assert body["hash"] == event.hash
    assert body["object"] == {"type": "thing", "id": "one"}


def test_it_answers_404_alike_for_missing_malformed_and_foreign_events(
    other_tenant, auditing_agent
):
    foreign = _record(other_tenant, action="foreign.event")
    bodies = [
        assert_problem(auditing_agent.get(f"{EVENTS}/{event_id}"), 404)
        for event_id in [foreign.pk, "3f1b0c4e-0000-4000-8000-000000000000", "nope"]
    ]
    assert bodies[0] == bodies[1] == bodies[2]


def test_it_refuses_writes(auditing_agent, tenant):
    event = _all_events(tenant)[0]
    assert_problem(auditing_agent.post(EVENTS, {"action": "forged"}), 405)
    assert_problem(auditing_agent.delete(f"{EVENTS}/{event.pk}"), 405)
