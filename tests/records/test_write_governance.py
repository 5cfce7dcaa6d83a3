"""Governance at the write boundary: sensitivity raised by a re-observation, values compared by
their JSON meaning, and redaction applied (or verified) before anything is stored."""

from __future__ import annotations

import json
from datetime import timedelta

import numpy
import pytest

from apps.derivations.embeddings import tenant_embedder
from apps.derivations.models import Embedding
from apps.records.models import MemoryRecord, Observation
from apps.tenancy.context import tenant_scope
from apps.work.models import OutboxMessage
from tests.conftest import make_agent
from tests.derivations.support import drain

from .support import RECORDS, audit_events, audit_row_text, row_counts, ts, write, write_ok

pytestmark = pytest.mark.django_db

SEARCH = "/api/v1/search"
CARD = "4111111111111111"


# --- a re-observation at a higher sensitivity -----------------------------------------------


def test_it_raises_the_class_and_shortens_the_lifetime_on_a_higher_class(
    agent, second_agent, tenant
):
    first = write_ok(agent, sensitivity="internal", retention={"basis": "contract"})
    # internal's provisional rule (90 days) applies: no ttl was asked for.
    assert ts(first["expires_at"]) - ts(first["observed_at"]) == timedelta(days=90)

    again = write_ok(
        second_agent, sensitivity="restricted", source__ref="interaction:9", status=201
    )

    assert again["id"] == first["id"]
    assert again["outcome"] == "observed"
    assert again["sensitivity"] == "restricted"
    # restricted's provisional rule is 7 days, counted from when the record was written.
    assert ts(again["expires_at"]) - ts(first["observed_at"]) == timedelta(days=7)
    assert any("restricted" in notice and "raised" in notice for notice in again["notices"])
    # Now restricted: a credential issued without restricted sight no longer reads it.
    blind = make_agent(tenant, "read", name="blind", sees_restricted=False)
    assert blind.get(f"{RECORDS}/{first['id']}").status_code == 404
    stored = agent.get(f"{RECORDS}/{first['id']}").json()
    assert stored["sensitivity"] == "restricted"
    assert stored["expires_at"] == again["expires_at"]
    [event] = audit_events(tenant, "record.reclassify")
    assert event.object_id == first["id"]
    assert event.data["from"] == "internal"
    assert event.data["to"] == "restricted"


def test_a_raised_class_hides_the_record_below_its_new_ceiling(agent, second_agent):
    write_ok(agent, sensitivity="internal", value="carrier_zeta")
    write_ok(second_agent, sensitivity="restricted", value="carrier_zeta", source__ref="doc:1")
    response = agent.post(SEARCH, {"query": "carrier_zeta", "sensitivity_max": "personal"})
    assert response.status_code == 200, response.content
    assert response.json()["results"] == []


def test_it_never_lengthens_the_lifetime_when_raising_the_class(agent, second_agent):
    first = write_ok(agent, sensitivity="internal", retention={"basis": "contract", "ttl": "P2D"})
    again = write_ok(second_agent, sensitivity="personal", source__ref="interaction:9")
    assert again["sensitivity"] == "personal"
    assert again["expires_at"] == first["expires_at"]


def test_the_same_source_at_a_higher_class_still_raises_it(agent):
    first = write_ok(agent, sensitivity="internal")
    again = write_ok(agent, sensitivity="restricted", status=200)
    assert again["outcome"] == "unchanged"
    assert again["sensitivity"] == "restricted"
    assert ts(again["expires_at"]) - ts(first["observed_at"]) == timedelta(days=7)
    assert again["notices"]


def test_a_lower_class_changes_nothing_and_says_so(agent, second_agent, tenant):
    first = write_ok(agent, sensitivity="restricted")
    again = write_ok(second_agent, sensitivity="public", source__ref="interaction:9")
    assert again["sensitivity"] == "restricted"
    assert again["expires_at"] == first["expires_at"]
    assert any("public" in n and "restricted" in n for n in again["notices"])
    assert audit_events(tenant, "record.reclassify") == []


def test_the_same_class_gives_no_class_notice(agent, second_agent):
    write_ok(agent, sensitivity="personal")
    again = write_ok(second_agent, sensitivity="personal", source__ref="interaction:9")
    assert not any("class" in notice for notice in again["notices"])


# --- values compared by JSON meaning ---------------------------------------------------------


@pytest.mark.parametrize(
    ("stored", "observed"),
    [
        (1, 1.0),
        (1.0, 1),
        ({"n": [1, {"x": 2}], "y": 0}, {"y": 0.0, "n": [1.0, {"x": 2.0}]}),
        (10**20, 1e20),
    ],
)
def test_numbers_equal_in_value_are_the_same_value(agent, second_agent, stored, observed):
    first = write_ok(agent, value=stored)
    again = write_ok(second_agent, value=observed, source__ref="interaction:9")
    assert again["outcome"] == "observed"
    assert again["id"] == first["id"]
    assert again["conflict"] is None


@pytest.mark.parametrize(
    ("stored", "observed"),
    [(1, True), (True, 1), (0, False), (1, "1"), ([1, 2], [2, 1]), ({"a": 1}, {"a": 1, "b": 1})],
)
def test_values_different_in_meaning_open_a_conflict(agent, second_agent, stored, observed):
    write_ok(agent, value=stored)
    again = write_ok(second_agent, value=observed, source__ref="interaction:9")
    assert again["outcome"] == "conflict"
    assert again["conflict"] is not None


def test_values_nested_deeper_than_the_recursion_limit_compare():
    from apps.core.validation import json_equal

    integers: object = 1
    floats: object = 1.0
    objects: object = 1
    for _ in range(5000):
        integers, floats, objects = [integers], [floats], {"n": objects}
    assert json_equal(integers, floats)
    assert not json_equal(integers, objects)


def test_the_same_number_at_a_higher_class_raises_the_class(agent, second_agent):
    first = write_ok(agent, value={"limit": 1}, sensitivity="internal")
    again = write_ok(
        second_agent, value={"limit": 1.0}, sensitivity="restricted", source__ref="doc:2"
    )
    assert again["outcome"] == "observed"
    assert again["id"] == first["id"]
    assert again["sensitivity"] == "restricted"
    assert ts(again["expires_at"]) - ts(first["observed_at"]) == timedelta(days=7)


# --- redaction required at write --------------------------------------------------------------


def _card_write(agent, redaction, **extra):
    return write(
        agent,
        key="payment.card",
        value={"card": {"number": CARD, "brand": "visa"}},
        content=f"pays with visa card {CARD}",
        redaction=redaction,
        **extra,
    )


def test_required_redaction_is_applied_before_anything_is_stored(agent, tenant):
    response = _card_write(agent, {"state": "required", "fields": ["card.number"]})
    assert response.status_code == 201, response.content
    body = response.json()
    assert CARD not in json.dumps(body)
    assert body["value"] == {"card": {"number": "[REDACTED]", "brand": "visa"}}
    assert body["content"] == "pays with visa card [REDACTED]"
    assert body["redaction"] == {"state": "applied", "fields": ["card.number"]}
    assert body["status"] == "active"
    with tenant_scope(tenant.pk):
        stored = MemoryRecord.objects.get(pk=body["id"])
        assert CARD not in json.dumps(stored.value)
        assert CARD not in stored.content
        assert stored.redaction_state == "applied"
        queued = OutboxMessage.objects.filter(object_id=body["id"])
        assert CARD not in json.dumps(list(queued.values_list("payload", flat=True)))
    assert not any(CARD in audit_row_text(event) for event in audit_events(tenant))

    drain()  # the embedding is computed from the stored (redacted) text
    embedder = tenant_embedder(tenant)
    with tenant_scope(tenant.pk):
        [embedding] = Embedding.objects.filter(record_id=body["id"])
    redacted_vector = embedder.embed(["pays with visa card [REDACTED]"])[0]
    plaintext_vector = embedder.embed([f"pays with visa card {CARD}"])[0]
    assert numpy.allclose(embedding.vector, redacted_vector)
    assert not numpy.allclose(embedding.vector, plaintext_vector)
    fetched = agent.get(f"{RECORDS}/{body['id']}")
    assert CARD not in fetched.content.decode()
    search = agent.post(SEARCH, {"query": CARD})
    assert search.status_code == 200, search.content
    assert CARD not in search.content.decode()
    # Nothing matches the number's text. (Without a relevance floor a vector neighbour may
    # still be listed, by its similarity to the redacted text only: see the vector above.)
    hits = [hit for hit in search.json()["results"] if hit["record"]["id"] == body["id"]]
    assert all(hit["why"]["text"] is None for hit in hits)
    scoped = agent.post(SEARCH, {"query": CARD, "keys": ["payment.card"], "top_k": 1}).json()
    assert all(hit["why"]["text"] is None for hit in scoped["results"])
    # The record itself is still found by what it kept.
    kept = agent.post(SEARCH, {"query": "visa card"}).json()["results"]
    assert [hit["record"]["id"] for hit in kept] == [body["id"]]


def test_required_redaction_of_the_whole_value_rewrites_its_default_content(agent):
    body = write_ok(
        agent,
        key="contact.email",
        value="alice@example.com",
        redaction={"state": "required", "fields": ["value"]},
    )
    assert body["value"] == "[REDACTED]"
    assert "alice@example.com" not in body["content"]
    assert body["redaction"] == {"state": "applied", "fields": ["value"]}


def test_required_redaction_names_a_path_missing_from_the_value(agent, tenant):
    before = row_counts(tenant)
    response = _card_write(agent, {"state": "required", "fields": ["card.number", "card.cvc"]})
    assert response.status_code == 400, response.content
    assert response["Content-Type"] == "application/problem+json"
    errors = response.json()["errors"]
    assert list(errors) == ["redaction.fields"]
    assert "card.cvc" in errors["redaction.fields"][0]
    assert row_counts(tenant) == before


def test_required_redaction_needs_fields(agent, tenant):
    before = row_counts(tenant)
    response = _card_write(agent, {"state": "required"})
    assert response.status_code == 400, response.content
    assert "redaction.fields" in response.json()["errors"]
    assert row_counts(tenant) == before


def test_the_same_value_written_again_with_redaction_required_is_an_observation(
    agent, second_agent, tenant
):
    first = _card_write(agent, {"state": "required", "fields": ["card.number"]}).json()
    again = _card_write(
        second_agent, {"state": "required", "fields": ["card.number"]}, source__ref="doc:5"
    )
    assert again.status_code == 201, again.content
    assert again.json()["outcome"] == "observed"
    assert again.json()["id"] == first["id"]
    with tenant_scope(tenant.pk):
        assert Observation.objects.filter(record_id=first["id"]).count() == 2


# --- redaction claimed as applied -------------------------------------------------------------


def test_applied_redaction_with_plaintext_is_rejected_naming_the_field(agent, tenant):
    before = row_counts(tenant)
    response = _card_write(agent, {"state": "applied", "fields": ["card.number"]})
    assert response.status_code == 400, response.content
    assert response["Content-Type"] == "application/problem+json"
    errors = response.json()["errors"]
    assert list(errors) == ["redaction.fields"]
    assert "card.number" in errors["redaction.fields"][0]
    assert "[REDACTED]" in errors["redaction.fields"][0]
    assert CARD not in response.content.decode()
    assert row_counts(tenant) == before


def test_applied_redaction_naming_a_missing_field_is_rejected(agent, tenant):
    response = _card_write(agent, {"state": "applied", "fields": ["card.cvc"]})
    assert response.status_code == 400, response.content
    assert "card.cvc" in response.json()["errors"]["redaction.fields"][0]


def test_applied_redaction_whose_fields_hold_the_marker_is_accepted(agent):
    response = write(
        agent,
        key="payment.card",
        value={"card": {"number": "[REDACTED]", "brand": "visa"}},
        redaction={"state": "applied", "fields": ["value.card.number"]},
    )
    assert response.status_code == 201, response.content
    assert response.json()["redaction"] == {"state": "applied", "fields": ["value.card.number"]}


def test_the_schema_documents_notices_and_redaction_at_write(client):
    schema = client.get("/api/schema/", headers={"Accept": "application/json"}).json()
    components = schema["components"]["schemas"]
    notices = components["RecordWriteResponse"]["properties"]["notices"]["description"]
    assert "higher sensitivity" in notices
    assert "lower sensitivity" in notices
    redaction = components["RedactionInput"]["properties"]
    assert "[REDACTED]" in redaction["state"]["description"]
