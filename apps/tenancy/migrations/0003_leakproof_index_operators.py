"""Let GIN indexes work under row-level security (see memoryconsole.embedded).

Only a superuser may mark functions LEAKPROOF. When the migrating role is not one, this
migration changes nothing and logs what a superuser should run; queries stay correct, only
slower (sequential scans instead of index scans for conditions and full-text filters).
"""

import logging

from django.db import migrations

logger = logging.getLogger(__name__)

STATEMENTS = (
    "ALTER FUNCTION pg_catalog.jsonb_contains(jsonb, jsonb) LEAKPROOF",
    "ALTER FUNCTION pg_catalog.ts_match_vq(tsvector, tsquery) LEAKPROOF",
)


def forwards(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            "SELECT bool_and(proleakproof) FROM pg_proc "
            "WHERE proname IN ('jsonb_contains', 'ts_match_vq')"
        )
        done = cursor.fetchone()
        if done and done[0]:
            return  # already marked (the embedded server does it in template1)
        cursor.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
        row = cursor.fetchone()
        if not row or not row[0]:
            logger.warning(
                "Not a superuser: GIN indexes on scope conditions and full text will not be "
                "used under row-level security. As a superuser, run in this database: %s",
                "; ".join(STATEMENTS),
            )
            return
        for statement in STATEMENTS:
            cursor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [("tenancy", "0002_tenant_policy")]
    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
