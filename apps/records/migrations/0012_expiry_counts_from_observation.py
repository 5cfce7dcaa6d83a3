"""Lifetimes written before counted from ``written_at``; they now count from ``observed_at``
(``apps.records.models.lifetime``). Every stored lifetime was ``written_at`` plus a duration (the
ttl, the class's rule, or the earlier of them), so counting it from the observation moves it
earlier by the time between observation and write: this shortens each live version's
``expires_at`` by that gap, and never lengthens one.

Only versions still live by their clock change (``expires_at`` in the future, not expired by
status): a past expiry is history that evaluations and receipts have already read. A version
this brings into the past expires as if its time had passed: the next compaction deletes it
through the deletion path, with a receipt, unless a legal hold keeps it. An observation ahead
of its write (within the allowed clock skew) moves nothing.

Row-level security applies to the migrating role too, so the work goes tenant by tenant.
"""

from typing import Any

from django.db import migrations

SHORTEN = """
UPDATE records_memoryrecord
   SET expires_at = expires_at - (written_at - observed_at)
 WHERE expires_at > now()
   AND status <> 'expired'
   AND observed_at < written_at
"""


def count_lifetimes_from_observation(apps: Any, schema_editor: Any) -> None:
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT id FROM tenancy_tenant")
        tenant_ids = [row[0] for row in cursor.fetchall()]
        for tenant_id in tenant_ids:
            cursor.execute(
                "SELECT set_config('memoryconsole.tenant_id', %s, true)", [str(tenant_id)]
            )
            cursor.execute(SHORTEN)
        cursor.execute("SELECT set_config('memoryconsole.tenant_id', '', true)")


class Migration(migrations.Migration):
    dependencies = [("records", "0011_identifiers_in_one_spelling")]

    # Going back leaves the shortened lifetimes as they are: the gap each was shortened by is
    # still there (written_at - observed_at), but a version may have expired meanwhile.
    operations = [migrations.RunPython(count_lifetimes_from_observation, migrations.RunPython.noop)]
