"""The write boundary: every rule of API.md, its error path, and that a rejection stores
nothing and is audited without content."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from apps.records.models import Fact, MemoryRecord, Observation
from apps.records.serializers import write_input
from apps.records.validation import MAX_VALUE_BYTES, WriteRejected
from apps.tenancy.context import tenant_scope
from tests.api.support import assert_problem

from .factories import body
from .support import RECORDS, audit_events, audit_row_text, post_raw, row_counts, write

pytestmark = pytest.mark.django_db


def _with(**fields: Any) -> Callable[[], dict[str, Any]]:
    """A body with fields set to exactly these values (``None`` stays a JSON null)."""

    def build() -> dict[str, Any]:
        data = body()
        for name, value in fields.items():
            target = data
            parts = name.split("__")
            for part in parts[:-1]:
                target = target[part]
            target[parts[-1]] = value
        return data

    return build


def _without(name: str) -> Callable[[], dict[str, Any]]:
    return lambda: body(**{name: None})


def _future(delta: timedelta) -> str:
    return (timezone.now() + delta).isoformat().replace("+00:00", "Z")


# (case id, body builder, the field path that must be named)
INVALID: list[tuple[str, Callable[[], dict[str, Any]], str]] = [
    ("key-missing", _without("key"), "key"),
    ("key-null", _with(key=None), "key"),
    ("key-empty", _with(key=""), "key"),
    ("key-not-a-string", _with(key=12), "key"),
    ("key-uppercase-and-space", _with(key="Shipping Preference"), "key"),
    ("key-empty-segment", _with(key="shipping..preference"), "key"),
    ("key-leading-dot", _with(key=".shipping"), "key"),
    ("key-too-long", _with(key="k" * 201), "key"),
    ("subject-missing", _without("subject"), "subject"),
    ("subject-without-kind", _with(subject="8812"), "subject"),
    ("subject-with-space", _with(subject="user: 8812"), "subject"),
    ("subject-not-a-string", _with(subject=["user:1"]), "subject"),
    ("value-missing", _without("value"), "value"),
    ("value-null", _with(value=None), "value"),
    ("content-empty", _with(content=""), "content"),
    ("content-blank", _with(content="   "), "content"),
    ("content-not-a-string", _with(content={"text": "x"}), "content"),
    ("source-missing", _without("source"), "source"),
    ("source-not-an-object", _with(source="interaction:4821"), "source"),
    ("source-kind-missing", _without("source__kind"), "source.kind"),
    ("source-kind-unknown", _with(source__kind="email"), "source.kind"),
    ("source-kind-not-a-string", _with(source__kind=["interaction"]), "source.kind"),
    ("source-ref-missing", _without("source__ref"), "source.ref"),
    ("source-ref-empty", _with(source__ref=""), "source.ref"),
    ("source-unknown-member", _with(source__url="https://example.com"), "source.url"),
    ("observed-at-missing", _without("observed_at"), "observed_at"),
    ("observed-at-not-a-timestamp", _with(observed_at="yesterday"), "observed_at"),
    ("observed-at-date-only", _with(observed_at="2025-01-14"), "observed_at"),
    ("observed-at-no-zone", _with(observed_at="2025-01-14T09:12:00"), "observed_at"),
    ("observed-at-bad-date", _with(observed_at="2025-13-45T09:12:00Z"), "observed_at"),
    ("observed-at-a-number", _with(observed_at=1736845920), "observed_at"),
    (
        "observed-at-an-hour-ahead",
        lambda: body(observed_at=_future(timedelta(hours=1))),
        "observed_at",
    ),
    (
        "observed-at-beyond-skew",
        lambda: body(observed_at=_future(timedelta(minutes=2))),
        "observed_at",
    ),
    ("owner-missing", _without("owner"), "owner"),
    ("owner-without-kind", _with(owner="alice"), "owner"),
    ("owner-unknown-kind", _with(owner="robot:r2"), "owner"),
    ("owner-empty", _with(owner=""), "owner"),
    ("reason-missing", _without("reason"), "reason"),
    ("reason-empty", _with(reason=""), "reason"),
    ("reason-blank", _with(reason="   "), "reason"),
    ("reason-not-a-string", _with(reason=42), "reason"),
    ("scope-missing", _without("scope"), "scope"),
    ("scope-not-an-object", _with(scope="commerce"), "scope"),
    ("scope-domain-missing", _without("scope__domain"), "scope.domain"),
    ("scope-domain-empty", _with(scope__domain=""), "scope.domain"),
    ("scope-domain-bad-syntax", _with(scope__domain="Commerce & Co"), "scope.domain"),
    ("scope-task-type-bad-syntax", _with(scope__task_type="Check Out"), "scope.task_type"),
    ("scope-unknown-member", _with(scope__region="eu"), "scope.region"),
    ("scope-conditions-not-an-object", _with(scope__conditions=["eu"]), "scope.conditions"),
    ("sensitivity-missing", _without("sensitivity"), "sensitivity"),
    ("sensitivity-unknown", _with(sensitivity="secret"), "sensitivity"),
    ("sensitivity-wrong-case", _with(sensitivity="Personal"), "sensitivity"),
    ("retention-missing", _without("retention"), "retention"),
    ("retention-not-an-object", _with(retention="contract"), "retention"),
    ("retention-basis-missing", _without("retention__basis"), "retention.basis"),
    ("retention-basis-unknown", _with(retention__basis="forever"), "retention.basis"),
    ("retention-unknown-member", _with(retention__max="P1D"), "retention.max"),
    ("ttl-not-iso", _with(retention__ttl="30 days"), "retention.ttl"),
    ("ttl-a-number", _with(retention__ttl=30), "retention.ttl"),
    ("ttl-zero-days", _with(retention__ttl="P0D"), "retention.ttl"),
    ("ttl-zero-seconds", _with(retention__ttl="PT0S"), "retention.ttl"),
    ("ttl-bare-p", _with(retention__ttl="P"), "retention.ttl"),
    ("ttl-negative", _with(retention__ttl="-P1D"), "retention.ttl"),
    ("ttl-negative-inside", _with(retention__ttl="P-1D"), "retention.ttl"),
    ("ttl-absurdly-long", _with(retention__ttl="P99999999999D"), "retention.ttl"),
    ("consent-without-ref", _with(retention__basis="consent"), "retention.consent_ref"),
    (
        "consent-with-empty-ref",
        _with(retention__basis="consent", retention__consent_ref=""),
        "retention.consent_ref",
    ),
    ("session-without-run", _with(retention__basis="session"), "source.run_id"),
    ("redaction-not-an-object", _with(redaction="none"), "redaction"),
    ("redaction-state-unknown", _with(redaction={"state": "partial"}), "redaction.state"),
    ("redaction-fields-not-a-list", _with(redaction={"fields": "email"}), "redaction.fields"),
    ("redaction-fields-not-strings", _with(redaction={"fields": [1, 2]}), "redaction.fields"),
    ("redaction-fields-empty-name", _with(redaction={"fields": [""]}), "redaction.fields"),
    ("redaction-unknown-member", _with(redaction={"state": "none", "by": "x"}), "redaction.by"),
    ("unknown-top-level-field", _with(colour="blue"), "colour"),
    ("tenant-in-body", _with(tenant="globex"), "tenant"),
]


@pytest.mark.parametrize(
    ("build", "path"), [(b, p) for _, b, p in INVALID], ids=[i for i, *_ in INVALID]
)
def test_it_rejects_an_invalid_field_naming_its_path(agent, tenant, build, path):
    response = agent.post(RECORDS, build())
    problem = assert_problem(response, 400)
    assert path in problem["errors"], problem
    assert row_counts(tenant) == {"records": 0, "facts": 0, "observations": 0}


@pytest.mark.parametrize(
    "field",
    ["writer", "trust", "status", "version", "id", "written_at", "expires_at", "supersedes"],
)
def test_it_rejects_server_owned_fields(agent, tenant, field):
    data = body()
    data[field] = {"type": "credential", "id": "someone-else"} if field == "writer" else "x"
    problem = assert_problem(agent.post(RECORDS, data), 400)
    assert list(problem["errors"]) == [field]
    assert problem["errors"][field][0] != "Unknown field."  # it says why the server owns it
    assert row_counts(tenant)["records"] == 0


@pytest.mark.parametrize(
    "raw",
    ['[{"key": "a"}]', '"shipping.preference"', "42", "null", "true"],
    ids=["list", "string", "number", "null", "boolean"],
)
def test_it_rejects_a_body_that_is_not_an_object(agent, tenant, raw):
    problem = assert_problem(post_raw(agent, RECORDS, raw), 400)
    assert "body" in problem["errors"]
    assert row_counts(tenant)["records"] == 0


def test_it_names_every_failing_field_at_once(agent):
    problem = assert_problem(agent.post(RECORDS, {}), 400)
    assert set(problem["errors"]) == {
        "key",
        "subject",
        "value",
        "source",
        "observed_at",
        "owner",
        "reason",
        "scope",
        "sensitivity",
        "retention",
    }


def test_it_names_every_nested_failure_at_once(agent):
    data = body(
        source={"kind": "email"},
        retention={"basis": "consent", "ttl": "soon"},
        scope={"task_type": "x"},
    )
    problem = assert_problem(agent.post(RECORDS, data), 400)
    assert {
        "source.kind",
        "source.ref",
        "scope.domain",
        "retention.ttl",
        "retention.consent_ref",
    } <= set(problem["errors"])


def test_it_answers_413_for_a_value_over_64_kib(agent, tenant):
    data = body(value="x" * (MAX_VALUE_BYTES - 1))  # 2 quotes make it 64 KiB + 1
    problem = assert_problem(agent.post(RECORDS, data), 413)
    assert "value" in problem["errors"]
    assert row_counts(tenant)["records"] == 0


def test_it_accepts_a_value_of_exactly_64_kib(agent):
    data = body(value="x" * (MAX_VALUE_BYTES - 2))
    assert agent.post(RECORDS, data).status_code == 201


def test_it_answers_413_even_when_other_fields_fail_too(agent):
    data = body(value={"blob": "x" * MAX_VALUE_BYTES}, owner="nobody")
    problem = assert_problem(agent.post(RECORDS, data), 413)
    assert {"value", "owner"} <= set(problem["errors"])


def test_it_accepts_observed_at_within_the_clock_skew(agent):
    response = write(agent, observed_at=_future(timedelta(seconds=30)))
    assert response.status_code == 201, response.content


def test_it_accepts_observed_at_with_an_offset(agent):
    moment = (timezone.now() - timedelta(hours=2)).replace(microsecond=0)
    paris = moment.astimezone(timezone.get_fixed_timezone(60)).isoformat()
    response = write(agent, observed_at=paris)
    assert response.status_code == 201
    assert response.json()["observed_at"] == moment.isoformat().replace("+00:00", "Z")


def test_it_accepts_a_session_write_with_its_run(agent):
    run = agent.post("/api/v1/runs", {"task_id": "task-7", "owner": "service:checkout"}).json()
    response = write(agent, retention__basis="session", source__run_id=run["id"])
    assert response.status_code == 201, response.content
    assert response.json()["source"]["run_id"] == run["id"]


def test_it_accepts_a_consent_write_with_its_reference(agent):
    response = write(agent, retention__basis="consent", retention__consent_ref="consent:77")
    assert response.status_code == 201, response.content
    assert response.json()["retention"]["consent_ref"] == "consent:77"


def test_it_defaults_redaction_to_none(agent):
    assert write(agent).json()["redaction"] == {"state": "none", "fields": []}


def test_it_defaults_content_to_a_rendering_of_key_and_value(agent):
    record = write(agent, value={"carrier": "a"}).json()
    assert record["content"] == 'shipping.preference: {"carrier":"a"}'


def test_it_keeps_given_content(agent):
    assert write(agent, content="Prefers carrier A").json()["content"] == "Prefers carrier A"


@pytest.mark.parametrize(
    "raw_value",
    [
        '{"note": "\\u0000"}',
        '{"\\u0000": 1}',
        '"x\\u0000y"',
        '"\\ud800"',
        '{"k": "\\udfff"}',
        "1e400",
        "[-1e999]",
        "1e-400",
        '[0.5, {"x": -1E-999}]',
    ],
    ids=[
        "nul-in-nested-string",
        "nul-in-object-key",
        "nul-in-string",
        "lone-surrogate",
        "lone-low-surrogate",
        "number-overflowing-to-infinity",
        "negative-infinity-in-list",
        "number-underflowing-to-zero",
        "nested-number-underflowing-to-zero",
    ],
)
def test_it_rejects_a_value_the_database_cannot_store_as_a_field_error(agent, tenant, raw_value):
    raw = json.dumps(body(key="probe.value")).replace('"carrier_a"', raw_value)
    problem = assert_problem(post_raw(agent, RECORDS, raw), 400)
    # Named by the path of the offending part inside the value (value, value.note, value[0]).
    assert all(path.startswith("value") for path in problem["errors"]), problem["errors"]
    assert problem["errors"]
    assert row_counts(tenant)["records"] == 0


def test_it_keeps_a_zero_written_with_an_exponent_and_a_subnormal(agent):
    raw = json.dumps(body(key="probe.zero")).replace('"carrier_a"', "[0e-999, 0.0E-400, 5e-324]")
    response = post_raw(agent, RECORDS, raw)
    assert response.status_code == 201, response.content
    assert response.json()["value"] == [0, 0, 5e-324]


@pytest.mark.parametrize(
    ("field", "raw"),
    [
        ("reason", '"x\\u0000y"'),
        ("reason", '"\\ud800"'),
        ("source.ref", '"interaction:\\u0000"'),
        ("content", '"\\udc00 text"'),
    ],
    ids=["nul-in-reason", "surrogate-in-reason", "nul-in-ref", "surrogate-in-content"],
)
def test_it_rejects_text_the_database_cannot_store_as_a_field_error(agent, tenant, field, raw):
    data = body(key="probe.text", content="placeholder-content")
    data_text = json.dumps(data)
    old = {
        "reason": '"applied in checkout flow"',
        "source.ref": '"interaction:4821"',
        "content": '"placeholder-content"',
    }[field]
    problem = assert_problem(post_raw(agent, RECORDS, data_text.replace(old, raw)), 400)
    assert field in problem["errors"]
    assert row_counts(tenant)["records"] == 0


def test_it_rejects_nul_in_scope_conditions(agent, tenant):
    problem = assert_problem(write(agent, scope__conditions={"region\u0000": "eu"}), 400)
    assert list(problem["errors"]) == ["scope.conditions.region\u0000"]


@pytest.mark.parametrize(
    "observed_at",
    ["0001-01-01T00:00:00+05:00", "0001-01-01T03:00:00+14:00"],
    ids=["year-1-east-of-utc", "year-1-far-east"],
)
def test_it_rejects_a_timestamp_before_the_representable_range(agent, tenant, observed_at):
    problem = assert_problem(write(agent, observed_at=observed_at), 400)
    assert "observed_at" in problem["errors"]


def test_it_stores_nothing_of_a_rejected_write(agent, tenant):
    write(agent, key="kept.fact")
    before = row_counts(tenant)
    assert_problem(write(agent, key="rejected.fact", sensitivity="secret"), 400)
    assert row_counts(tenant) == before
    with tenant_scope(tenant.pk):
        assert not Fact.objects.filter(key="rejected.fact").exists()
        assert not MemoryRecord.objects.filter(key="rejected.fact").exists()
        assert Observation.objects.count() == 1


def test_it_audits_a_rejection_by_field_names_only(agent, tenant):
    secret = "carrier-very-secret-4711"
    data = body(
        value=secret,
        reason=f"because {secret}",
        owner=f"nobody {secret}",
        sensitivity=secret,
        content=f"content {secret}",
    )
    assert_problem(agent.post(RECORDS, data), 400)
    [event] = audit_events(tenant, "record.write_rejected")
    assert event.data["fields"] == ["owner", "sensitivity"]
    assert event.actor_id == str(agent.credential.pk)
    assert secret not in audit_row_text(event)
    assert "user:8812" not in audit_row_text(event)


def test_it_audits_a_rejected_oversized_value_without_it(agent, tenant):
    marker = "oversized-marker-"
    assert_problem(write(agent, value=marker + "x" * MAX_VALUE_BYTES), 413)
    [event] = audit_events(tenant, "record.write_rejected")
    assert event.data["fields"] == ["value"]
    assert marker not in audit_row_text(event)


def test_it_keeps_unknown_field_names_out_of_the_audit(agent, tenant):
    """An unknown member's *name* is submitted content too (it may be someone's email)."""
    data = body()
    data["jane.doe@example.com"] = "x"
    data["source"]["jane.roe@example.com"] = "y"
    problem = assert_problem(agent.post(RECORDS, data), 400)
    assert "jane.doe@example.com" in problem["errors"]  # the caller is told which one
    [event] = audit_events(tenant, "record.write_rejected")
    assert "example.com" not in audit_row_text(event)
    assert event.data["unknown_fields"] == 2


def test_it_audits_no_write_for_a_rejection(agent, tenant):
    assert_problem(write(agent, reason=""), 400)
    assert audit_events(tenant, "record.write") == []


def test_it_checks_every_rule_without_the_database():
    """The write contract needs no database: the console and the API share it."""
    with pytest.raises(WriteRejected) as rejected:
        write_input(body(sensitivity="secret", value=None))
    assert set(rejected.value.errors) == {"sensitivity", "value"}
    assert not rejected.value.too_large


# --- the documented clock skew, wherever a client says a moment has passed ---------------------


def test_it_refuses_observed_at_a_minute_ahead(agent, tenant):
    problem = assert_problem(write(agent, observed_at=_future(timedelta(seconds=60))), 400)
    assert "clock skew of 30 s" in problem["errors"]["observed_at"][0]
    assert row_counts(tenant)["records"] == 0


@pytest.mark.parametrize(
    ("path", "query"),
    [("/api/v1/facts", True), ("/api/v1/search", False)],
    ids=["facts", "search"],
)
def test_it_refuses_an_as_of_beyond_the_clock_skew(agent, path, query):
    ahead = _future(timedelta(minutes=2))
    if query:
        response = agent.get(path, {"subject": "user:8812", "as_of": ahead})
    else:
        response = agent.post(path, {"query": "carrier", "as_of": ahead})
    problem = assert_problem(response, 400)
    assert list(problem["errors"]) == ["as_of"]


def test_it_takes_an_as_of_within_the_clock_skew(agent):
    response = agent.get(
        "/api/v1/facts", {"subject": "user:8812", "as_of": _future(timedelta(seconds=5))}
    )
    assert response.status_code == 200, response.content
