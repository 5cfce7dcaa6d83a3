"""Embeddings carry their record's scope (domain and task type), kept by the database.

A scoped search used to look each filtered candidate's vector up by record id: one index
descent and one heap visit per candidate, most of an exact search's time. With the scope on
the embedding row, the exact plan reads the scope's vectors in one index range and joins them
to the candidates by hash, and an HNSW scan rejects out-of-scope vectors before it visits
their records.

The copy is written by a trigger on every insert and update, so no code path (the worker, an
agent's own vectors, ``reembed``, a bulk load) can leave it empty or wrong; a record's scope
never changes after it is written. An embedding whose record is not visible (not written yet,
or another tenant's) is refused.
"""

from typing import Any

from django.db import migrations, models

COPY_SCOPE = """
CREATE FUNCTION derivations_embedding_copy_scope() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.record_id IS NULL THEN
        NEW.scope_domain := '';
        NEW.scope_task_type := '';
        RETURN NEW;
    END IF;
    SELECT r.scope_domain, r.scope_task_type INTO NEW.scope_domain, NEW.scope_task_type
      FROM records_memoryrecord r WHERE r.id = NEW.record_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'embedding of record %: no such record in this tenant', NEW.record_id
            USING ERRCODE = 'foreign_key_violation';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER embedding_copy_scope BEFORE INSERT OR UPDATE ON derivations_embedding
    FOR EACH ROW EXECUTE FUNCTION derivations_embedding_copy_scope();
"""
DROP_COPY_SCOPE = """
DROP TRIGGER IF EXISTS embedding_copy_scope ON derivations_embedding;
DROP FUNCTION IF EXISTS derivations_embedding_copy_scope();
"""


def copy_existing_scopes(apps: Any, schema_editor: Any) -> None:
    """Rewrite every record's embedding: the trigger copies the scope. Row-level security
    applies to the migrating role too: tenant by tenant."""
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT id FROM tenancy_tenant")
        for (tenant_id,) in cursor.fetchall():
            cursor.execute(
                "SELECT set_config('memoryconsole.tenant_id', %s, true)", [str(tenant_id)]
            )
            cursor.execute(
                "UPDATE derivations_embedding SET scope_domain = '' "
                "WHERE record_id IS NOT NULL AND tenant_id = %s",
                [tenant_id],
            )
        cursor.execute("SELECT set_config('memoryconsole.tenant_id', '', true)")


class Migration(migrations.Migration):
    dependencies = [
        ("derivations", "0003_outboxmessage"),
        ("records", "0003_version_pointers_without_constraints"),
    ]

    operations = [
        migrations.AddField(
            model_name="embedding",
            name="scope_domain",
            field=models.CharField(blank=True, default="", editable=False, max_length=100),
        ),
        migrations.AddField(
            model_name="embedding",
            name="scope_task_type",
            field=models.CharField(blank=True, default="", editable=False, max_length=100),
        ),
        migrations.RunSQL(COPY_SCOPE, DROP_COPY_SCOPE),
        migrations.RunPython(copy_existing_scopes, migrations.RunPython.noop),
        migrations.RemoveIndex(model_name="embedding", name="embedding_tenant_model"),
        migrations.AddIndex(
            model_name="embedding",
            index=models.Index(
                fields=["tenant", "model", "scope_domain", "scope_task_type"],
                name="embedding_tenant_model_scope",
            ),
        ),
    ]
