"""``memoryconsole verify-erasure``: zero residues passes, any residue fails and is named."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from apps.derivations.models import Embedding
from apps.tenancy.context import tenant_scope
from tests.derivations.support import RECORDS, SEARCH, drain, summarise, write
from tests.factories import IdempotencyKeyFactory, OutboxMessageFactory
from tests.records.factories import body

pytestmark = pytest.mark.django_db


def write_with_key(agent, key: str, **overrides) -> dict:
    response = agent.post(RECORDS, body(**overrides), headers={"Idempotency-Key": key})
    assert response.status_code == 201, response.content[:800]
    return response.json()


def verify(receipt_id: str, capsys) -> tuple[bool, str]:
    try:
        call_command("verify_erasure", receipt_id)
    except CommandError as error:
        return False, capsys.readouterr().out + str(error)
    return True, capsys.readouterr().out


def test_a_deletion_receipt_verifies(admin_agent, capsys):
    record = write(admin_agent)
    summarise(admin_agent, [record["id"]])
    drain()
    receipt = admin_agent.delete(f"{RECORDS}/{record['id']}").json()
    ok, out = verify(receipt["id"], capsys)
    assert ok, out
    assert "0 residues" in out


def test_an_erasure_receipt_verifies(admin_agent, capsys):
    for key in ("a", "b", "c"):
        write(admin_agent, subject="user:9", key=key)
    drain()
    body = admin_agent.post("/api/v1/erasures", {"subject": "user:9", "reason": "x"}).json()
    ok, out = verify(body["id"], capsys)
    assert ok, out


def test_it_names_a_residue(admin_agent, tenant, capsys):
    record = write(admin_agent)
    drain()
    with tenant_scope(tenant.pk):
        vector = list(Embedding.objects.get(record_id=record["id"]).vector)
    receipt = admin_agent.delete(f"{RECORDS}/{record['id']}").json()
    # a stray outbox row naming the deleted record, as a buggy writer might leave
    OutboxMessageFactory(tenant=tenant, object_id=record["id"], payload={"record_id": record["id"]})
    assert vector
    ok, out = verify(receipt["id"], capsys)
    assert not ok
    assert "RESIDUE [outbox]" in out


def test_it_rejects_an_unknown_receipt(capsys):
    ok, out = verify("00000000-0000-0000-0000-000000000000", capsys)
    assert not ok
    assert "no deletion receipt" in out


def test_it_names_a_stored_response_that_mentions_a_deleted_id(admin_agent, tenant, capsys):
    record = write(admin_agent)
    drain()
    receipt = admin_agent.delete(f"{RECORDS}/{record['id']}").json()
    # a stored answer repeating the content beside the id, and a tombstone that kept some
    stored = IdempotencyKeyFactory(
        tenant=tenant,
        credential_id=admin_agent.credential.pk,
        key="k-1",
        response_body={"results": [{"id": record["id"].upper(), "content": "12 Elm Street"}]},
    )
    tombstone = IdempotencyKeyFactory(
        tenant=tenant,
        credential_id=admin_agent.credential.pk,
        key="k-2",
        tombstone=True,
        resource_id=record["id"],
        response_body={"id": record["id"], "status": "deleted", "value": "12 Elm Street"},
    )
    ok, out = verify(receipt["id"], capsys)
    assert not ok
    assert f"stored response {stored.pk} names a deleted id" in out
    assert f"stored response {tombstone.pk} names a deleted id" in out


def test_the_mention_check_scales_to_a_large_erasure(admin_agent, tenant):
    """One pass over the stored JSON, whatever the number of ids (100k here)."""
    import uuid

    from apps.governance.verification import UUID_PATTERN, _rows_mentioning

    ids = [str(uuid.uuid4()) for _ in range(100_000)]
    stored = IdempotencyKeyFactory(
        tenant=tenant,
        credential_id=admin_agent.credential.pk,
        key="k-2",
        response_body={"id": ids[-1]},
    )
    with tenant_scope(tenant.pk):
        found = _rows_mentioning("api_idempotencykey", "response_body", UUID_PATTERN, ids)
    assert found == [stored.pk]


def test_a_clean_deletion_of_an_idempotent_write_verifies(admin_agent, capsys):
    """The stored response becomes a content-free tombstone: what the product leaves on
    purpose (the id, "deleted") is no residue."""
    record = write_with_key(admin_agent, "write-1")
    search = admin_agent.post(SEARCH, {"query": "carrier"}, headers={"Idempotency-Key": "search-1"})
    assert record["id"] in search.content.decode()
    receipt = admin_agent.delete(f"{RECORDS}/{record['id']}").json()
    ok, out = verify(receipt["id"], capsys)
    assert ok, out
    assert "0 residues" in out
