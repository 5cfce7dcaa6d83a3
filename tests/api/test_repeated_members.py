"""A JSON object that names a member twice is refused, naming the member by its path.

JSON parsers disagree on which of two values counts (Python's keeps the last), so a body
``{"dry_run": true, "dry_run": false}`` means whatever the reader picks; the API reads neither.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from apps.audit.models import DeletionReceipt
from apps.records.models import MemoryRecord
from apps.tenancy.context import tenant_scope
from tests.conftest import make_agent
from tests.records.factories import body

from .support import assert_problem

pytestmark = pytest.mark.django_db

ALL_ACTIONS = "read,write,search,delete,review,state,erase,audit"
RECORDS = "/api/v1/records"
ERASURES = "/api/v1/erasures"


class Pairs(list[tuple[str, Any]]):
    """A JSON object as its members in order, repeats allowed (a dict cannot hold them)."""


def json_text(value: Any) -> str:
    """``value`` as JSON text, a :class:`Pairs` written member by member."""
    if isinstance(value, dict):
        value = Pairs(value.items())
    if isinstance(value, Pairs):
        return "{" + ", ".join(f"{json.dumps(k)}: {json_text(v)}" for k, v in value) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(json_text(item) for item in value) + "]"
    return json.dumps(value)


def with_member(obj: dict[str, Any], name: str, value: Any) -> Pairs:
    """``obj`` with ``name`` given again, after its own, as ``value``."""
    return Pairs([*obj.items(), (name, value)])


@pytest.fixture
def admin(tenant: Any) -> Any:
    return make_agent(tenant, ALL_ACTIONS, "admin-bot")


def stored(tenant: Any) -> int:
    with tenant_scope(tenant.pk):
        return MemoryRecord.objects.count()


def test_it_refuses_a_write_naming_the_key_twice(admin, tenant):
    payload = with_member(body(key="dup.k"), "key", "dup.j")
    response = admin.post(RECORDS, json_text(payload))
    problem = assert_problem(response, 400)
    assert list(problem["errors"]) == ["key"], problem
    assert "more than once" in problem["errors"]["key"][0]
    assert stored(tenant) == 0


@pytest.mark.parametrize(
    ("member", "inner", "again"),
    [
        ("scope", "domain", "travel"),
        ("source", "kind", "tool_call"),
        ("value", "carrier", "carrier_b"),
        ("retention", "ttl", "P1D"),
    ],
)
def test_it_refuses_a_write_naming_a_nested_member_twice(admin, tenant, member, inner, again):
    payload = body(value={"carrier": "carrier_a"})
    payload[member] = with_member(payload[member], inner, again)
    response = admin.post(RECORDS, json_text(payload))
    problem = assert_problem(response, 400)
    assert list(problem["errors"]) == [f"{member}.{inner}"], problem
    assert stored(tenant) == 0


def test_it_names_a_member_twice_deep_inside_a_value(admin, tenant):
    payload = body(value=[{"a": {"b": Pairs([("c", 1), ("c", 2)])}}])
    response = admin.post(RECORDS, json_text(payload))
    problem = assert_problem(response, 400)
    assert list(problem["errors"]) == ["value[0].a.b.c"], problem
    assert stored(tenant) == 0


def test_it_refuses_an_erasure_naming_dry_run_twice_and_erases_nothing(admin, tenant):
    assert admin.post(RECORDS, body(subject="user:1")).status_code == 201
    payload = Pairs(
        [("subject", "user:1"), ("reason", "GDPR"), ("dry_run", True), ("dry_run", False)]
    )
    response = admin.post(ERASURES, json_text(payload))
    problem = assert_problem(response, 400)
    assert list(problem["errors"]) == ["dry_run"], problem
    assert stored(tenant) == 1
    with tenant_scope(tenant.pk):
        assert not DeletionReceipt.objects.exists()


def test_it_refuses_an_erasure_naming_its_subject_twice(admin, tenant):
    assert admin.post(RECORDS, body(subject="user:1")).status_code == 201
    payload = Pairs([("subject", "user:2"), ("subject", "user:1"), ("reason", "GDPR")])
    response = admin.post(ERASURES, json_text(payload))
    problem = assert_problem(response, 400)
    assert list(problem["errors"]) == ["subject"], problem
    assert stored(tenant) == 1


def test_it_refuses_a_member_twice_in_a_json_query_parameter(admin):
    conditions = '{"region": "eu", "region": "us"}'
    response = admin.get("/api/v1/facts", {"subject": "user:1", "conditions": conditions})
    problem = assert_problem(response, 400)
    assert list(problem["errors"]) == ["conditions.region"], problem


def test_it_still_takes_the_same_name_in_different_objects(admin, tenant):
    payload = body(value={"name": {"name": "x"}, "items": [{"name": 1}, {"name": 2}]})
    response = admin.post(RECORDS, json_text(payload))
    assert response.status_code == 201, response.content
    assert stored(tenant) == 1
