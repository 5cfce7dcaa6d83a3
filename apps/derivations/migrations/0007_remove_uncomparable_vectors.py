"""Remove the stored vectors pgvector cannot compare, and embed their sources again.

Before the vector rule (``apps.derivations.vectors``), an agent could store a vector whose
squared length is 0 or overflows in pgvector's 32-bit floats (``[1e-320, ...]``, ``[1e-30,
...]``, ``[1e20, ...]``), and the hashing model stored the zero vector of a text without a
word. Every cosine distance to such a vector is NaN or meaningless, and a search that met one
failed. pgvector's own arithmetic finds them: a vector's distance to itself is NaN exactly
when its squared length is 0 or infinite.

Each one is deleted, so its record or summary is unembedded, as if written without a vector:
found by its text, and, where the tenant's model computes vectors, queued for embedding
through the outbox as a new write is (the worker stores the new vector only if it passes the
rule). Each removal is audited (``embedding.remove``, by the system, with the model and
whether it was queued again). Row-level security applies to the migrating role too, so the
work goes tenant by tenant.
"""

from typing import Any

from django.db import migrations
from django.utils import timezone

from apps.audit.services import audit_record
from apps.core.actors import Actor

REASON = (
    "pgvector cannot compare this vector (its squared length in 32-bit floats is 0 or "
    "overflows); removed so that searches never meet it."
)
UNCOMPARABLE = """
    SELECT id, record_id, summary_id, model FROM derivations_embedding
     WHERE tenant_id = %s AND (vector <=> vector) = 'NaN'::float8
     ORDER BY id
"""
EMBED_TASKS = {"record": "derivations.embed_record", "summary": "derivations.embed_summary"}


def remove_uncomparable_vectors(apps: Any, schema_editor: Any) -> None:
    Tenant = apps.get_model("tenancy", "Tenant")
    for tenant_id, model in Tenant.objects.values_list("id", "embedding_model"):
        with schema_editor.connection.cursor() as cursor:
            cursor.execute(
                "SELECT set_config('memoryconsole.tenant_id', %s, true)", [str(tenant_id)]
            )
            cursor.execute(UNCOMPARABLE, [tenant_id])
            found = cursor.fetchall()
        if found:
            _remove(apps, tenant_id, model, found)
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT set_config('memoryconsole.tenant_id', '', true)")


def _remove(apps: Any, tenant_id: Any, tenant_model: str, found: list[Any]) -> None:
    Embedding = apps.get_model("derivations", "Embedding")
    OutboxMessage = apps.get_model("derivations", "OutboxMessage")
    Summary = apps.get_model("derivations", "Summary")
    system = Actor.system("migration")
    now = timezone.now()
    computes = not tenant_model.startswith("client-")
    for embedding_id, record_id, summary_id, model in found:
        kind, source_id = ("record", record_id) if record_id else ("summary", summary_id)
        Embedding.objects.filter(pk=embedding_id).delete()
        requeue = computes and model == tenant_model
        if kind == "summary" and requeue:
            requeue = Summary.objects.filter(pk=source_id, valid=True).exists()
        if (
            requeue
            and not OutboxMessage.objects.filter(
                task_name=EMBED_TASKS[kind], object_id=source_id, state="pending"
            ).exists()
        ):
            OutboxMessage.objects.create(
                tenant_id=tenant_id,
                task_name=EMBED_TASKS[kind],
                object_id=source_id,
                payload={f"{kind}_id": str(source_id)},
                created_at=now,
            )
        audit_record(
            tenant=tenant_id,
            actor=system,
            action="embedding.remove",
            object_type=kind,
            object_id=str(source_id),
            data={
                "model": model,
                "embedding": str(embedding_id),
                "requeued": requeue,
                "reason": REASON,
                "target": {kind: str(source_id)},
            },
            lane_key=str(source_id),
        )


class Migration(migrations.Migration):
    dependencies = [
        ("derivations", "0006_erasure_job"),
        ("audit", "0004_receipt_rewritten_at"),
        ("tenancy", "0006_erase_memories_permission"),
    ]

    operations = [migrations.RunPython(remove_uncomparable_vectors, migrations.RunPython.noop)]
