from typing import Any

from django.db import migrations, models


def mark_tenants_with_summaries(apps: Any, schema_editor: Any) -> None:
    """Row-level security applies to the migrating role too: look tenant by tenant."""
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT id FROM tenancy_tenant")
        for (tenant_id,) in cursor.fetchall():
            cursor.execute(
                "SELECT set_config('memoryconsole.tenant_id', %s, true)", [str(tenant_id)]
            )
            cursor.execute(
                "UPDATE tenancy_tenant SET summaries_written = true WHERE id = %s "
                "AND EXISTS (SELECT 1 FROM derivations_summary WHERE tenant_id = %s)",
                [tenant_id, tenant_id],
            )
        cursor.execute("SELECT set_config('memoryconsole.tenant_id', '', true)")


class Migration(migrations.Migration):
    dependencies = [
        ("tenancy", "0003_leakproof_index_operators"),
        ("derivations", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="tenant",
            name="summaries_written",
            field=models.BooleanField(default=False, editable=False),
        ),
        migrations.RunPython(mark_tenants_with_summaries, migrations.RunPython.noop),
    ]
