"""``insert_clause`` stores what ``save()`` stores: the fast path a record's deletion takes to
put its receipt and ledger entry in its audit event's statement, held to the plain path."""

from __future__ import annotations

import copy
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, models
from django.db.models import Value
from django.utils import timezone
from psycopg import sql

from apps.audit.models import DeletionReceipt, ErasureLedgerEntry
from apps.audit.services import erasure_ledger_entry
from apps.core.database import insert_clause
from apps.tenancy.context import tenant_scope


def _row(model: type[models.Model], pk: Any) -> dict[str, Any]:
    """The stored row, every concrete column, as the database returns it."""
    meta = model._meta
    columns = [f.column for f in meta.concrete_fields]
    with connection.cursor() as cursor:
        cursor.execute(
            sql.SQL("SELECT {} FROM {} WHERE {} = %s").format(
                sql.SQL(", ").join(map(sql.Identifier, columns)),
                sql.Identifier(meta.db_table),
                sql.Identifier(meta.pk.column),
            ),
            [pk],
        )
        row = cursor.fetchone()
    assert row is not None, f"{meta.label} {pk} was not stored"
    return dict(zip(columns, row, strict=True))


def _twins(instance: models.Model) -> tuple[models.Model, models.Model]:
    """Two unsaved copies of ``instance`` differing only in their primary key."""
    one, two = copy.deepcopy(instance), copy.deepcopy(instance)
    one.pk, two.pk = uuid.uuid4(), uuid.uuid4()
    return one, two


def _stored_alike(instance: models.Model) -> None:
    saved, inserted = _twins(instance)
    saved.save(force_insert=True)
    statement, params = insert_clause(inserted)
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
    model = type(instance)
    plain, fast = _row(model, saved.pk), _row(model, inserted.pk)
    pk = model._meta.pk.column
    assert {**plain, pk: None} == {**fast, pk: None}
    assert not inserted._state.adding
    assert model.objects.get(pk=inserted.pk).pk == inserted.pk


@pytest.mark.django_db(transaction=False)
def test_a_receipt_is_stored_as_save_stores_it(tenant: Any) -> None:
    now = timezone.now()
    parent = DeletionReceipt(
        tenant_id=tenant.pk,
        kind="erasure",
        requested_by_type="agent",
        reason="parent",
        deleted_at=now,
    )
    with tenant_scope(tenant.pk):
        parent.save(force_insert=True)
        _stored_alike(
            DeletionReceipt(
                tenant_id=tenant.pk,
                kind="record",
                requested_by_type="agent",
                requested_by_id="a1",
                requested_by_label="agent:bench ü",
                reason='it\'s "quoted"; -- and not SQL',
                deleted_at=now,
                fact_id=uuid.uuid4(),
                record_ids=[str(uuid.uuid4()), str(uuid.uuid4())],
                counts={"records_memoryrecord": 2, "nested": {"x": [1, None]}},
                content_digest="d" * 64,
                subject_digest="s" * 64,
                written_from=now - timedelta(days=3),
                parent=parent,
            )
        )


@pytest.mark.django_db(transaction=False)
def test_a_receipt_left_to_its_defaults_is_stored_as_save_stores_it(tenant: Any) -> None:
    # subject_digest and the JSON fields take their defaults; fact, written_from and parent
    # are NULL.
    with tenant_scope(tenant.pk):
        _stored_alike(
            DeletionReceipt(
                tenant_id=tenant.pk,
                requested_by_type="system",
                reason="r",
                deleted_at=timezone.now(),
            )
        )


@pytest.mark.django_db(transaction=False)
def test_a_ledger_entry_is_stored_as_save_stores_it(tenant: Any) -> None:
    with tenant_scope(tenant.pk):
        _stored_alike(
            erasure_ledger_entry(
                tenant_id=tenant.pk,
                kind=ErasureLedgerEntry.Kind.DELETION,
                target={"facts": [uuid.uuid4()], "records": [uuid.uuid4(), uuid.uuid4()]},
                reason="a reason with 'quotes' and \\ backslashes",
                reference=str(uuid.uuid4()),
            )
        )


def test_an_expression_is_refused() -> None:
    entry = erasure_ledger_entry(tenant_id=uuid.uuid4(), kind="deletion", target={}, reason="r")
    entry.reason = Value("r")
    with pytest.raises(ValueError, match="an expression"):
        insert_clause(entry)


def test_an_instance_without_a_primary_key_is_refused() -> None:
    entry = ErasureLedgerEntry(id=None, tenant_id=uuid.uuid4(), target={})
    with pytest.raises(ValueError, match="primary key"):
        insert_clause(entry)
