"""Subjects and owners stored before in one spelling: Unicode NFC, case-folded.

Identifiers are now normalised where they enter (``apps.records.validation
.identifier_normalised``): ``user:Alice`` and ``user:alice`` are one subject for facts, search
and erasure. This brings the rows written before to the same spelling: facts and their
versions, legal holds, runs and obligations (subject and owner).

A fact whose folded subject would collide with another fact of the same key and scope
(``user:Alice`` and ``user:alice`` both holding ``shipping.preference`` in commerce) keeps
its old spelling, with its versions, rather than being merged without review: the migration
logs each such fact, and an operator decides (erase one, or write the value again under the
folded subject). Audit events and deletion receipts are history and keep what they said.

Row-level security applies to the migrating role too, so the work goes tenant by tenant.
"""

import logging
import unicodedata
from typing import Any

from django.db import migrations

logger = logging.getLogger(__name__)

# Rows that can change: an upper-case ASCII letter or any non-ASCII character.
CANDIDATE = r"~ '[A-Z]|[^\x01-\x7f]'"


def _fold(value: str) -> str:
    return unicodedata.normalize("NFC", unicodedata.normalize("NFC", value).casefold())


def _fold_column(cursor: Any, table: str, column: str) -> int:
    cursor.execute(f"SELECT id, {column} FROM {table} WHERE {column} {CANDIDATE}")  # noqa: S608
    changed = 0
    for row_id, value in cursor.fetchall():
        folded = _fold(value)
        if folded != value:
            cursor.execute(f"UPDATE {table} SET {column} = %s WHERE id = %s", [folded, row_id])  # noqa: S608
            changed += 1
    return changed


def _fold_facts(cursor: Any) -> None:
    cursor.execute(f"SELECT id, subject, key, scope_id FROM records_fact WHERE subject {CANDIDATE}")  # noqa: S608
    for fact_id, subject, key, scope_id in cursor.fetchall():
        folded = _fold(subject)
        if folded == subject:
            continue
        cursor.execute(
            "SELECT 1 FROM records_fact WHERE subject = %s AND key = %s AND scope_id = %s",
            [folded, key, scope_id],
        )
        if cursor.fetchone():
            logger.warning(
                "Fact %s keeps its subject %r: %r already holds %s in its scope. "
                "Erase one, or write the value again under the folded subject.",
                fact_id,
                subject,
                folded,
                key,
            )
            continue
        cursor.execute("UPDATE records_fact SET subject = %s WHERE id = %s", [folded, fact_id])
        cursor.execute(
            "UPDATE records_memoryrecord SET subject = %s WHERE fact_id = %s", [folded, fact_id]
        )


def fold_identifiers(apps: Any, schema_editor: Any) -> None:
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT id FROM tenancy_tenant")
        tenant_ids = [row[0] for row in cursor.fetchall()]
        for tenant_id in tenant_ids:
            cursor.execute(
                "SELECT set_config('memoryconsole.tenant_id', %s, true)", [str(tenant_id)]
            )
            _fold_facts(cursor)
            _fold_column(cursor, "records_memoryrecord", "owner")
            _fold_column(cursor, "records_legalhold", "subject")
            for table in ("state_run", "state_obligation"):
                _fold_column(cursor, table, "subject")
            _fold_column(cursor, "state_run", "owner")
        cursor.execute("SELECT set_config('memoryconsole.tenant_id', '', true)")


class Migration(migrations.Migration):
    dependencies = [
        ("records", "0010_multilingual_search"),
        ("state", "0002_run_obligation_subject"),
    ]

    operations = [migrations.RunPython(fold_identifiers, migrations.RunPython.noop)]
