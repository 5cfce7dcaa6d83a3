"""Erasure jobs, moved from derivations with their table as it is."""

import uuid
from typing import Any

import django.db.models.deletion
from django.db import migrations, models

# The models' content types (and so their permissions and admin log entries) follow them to
# governance; a database migrated from scratch has none yet (post_migrate creates them).
MOVED = ("erasurejob",)


def content_types_forwards(apps: Any, schema_editor: Any) -> None:
    rename(apps, "derivations", "governance")


def content_types_backwards(apps: Any, schema_editor: Any) -> None:
    rename(apps, "governance", "derivations")


def rename(apps: Any, old: str, new: str) -> None:
    ContentType = apps.get_model("contenttypes", "ContentType")
    for model in MOVED:
        if not ContentType.objects.filter(app_label=new, model=model).exists():
            ContentType.objects.filter(app_label=old, model=model).update(app_label=new)


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("audit", "0006_erasure_ledger_consent"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("derivations", "0008_outbox_available_at"),
        ("tenancy", "0011_tenant_promotion_and_read_audit_policy"),
    ]

    operations = [
        # State only: the table keeps its name (Meta.db_table), its rows, its row-level
        # security and its grants; nothing in the database changes.
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="ErasureJob",
                    fields=[
                        (
                            "id",
                            models.UUIDField(
                                default=uuid.uuid4,
                                editable=False,
                                primary_key=True,
                                serialize=False,
                            ),
                        ),
                        (
                            "state",
                            models.CharField(
                                choices=[
                                    ("queued", "queued"),
                                    ("running", "running"),
                                    ("done", "done"),
                                    ("failed", "failed"),
                                ],
                                default="queued",
                                max_length=16,
                            ),
                        ),
                        ("selector", models.CharField(max_length=16)),
                        ("value", models.CharField(blank=True, max_length=200)),
                        ("value_digest", models.CharField(max_length=64)),
                        ("reason", models.TextField()),
                        ("requested_by_type", models.CharField(max_length=16)),
                        ("requested_by_id", models.CharField(blank=True, max_length=64)),
                        ("requested_by_label", models.CharField(blank=True, max_length=200)),
                        ("requested_at", models.DateTimeField()),
                        ("started_at", models.DateTimeField(blank=True, null=True)),
                        ("finished_at", models.DateTimeField(blank=True, null=True)),
                        ("records_matched", models.PositiveIntegerField(default=0)),
                        ("records_erased", models.PositiveIntegerField(default=0)),
                        ("totals", models.JSONField(blank=True, null=True)),
                        ("error", models.TextField(blank=True)),
                        (
                            "receipt",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="+",
                                to="audit.deletionreceipt",
                            ),
                        ),
                        (
                            "tenant",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="+",
                                to="tenancy.tenant",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "derivations_erasurejob",
                        "indexes": [
                            models.Index(
                                fields=["tenant", "requested_at"],
                                name="erasurejob_tenant_requested",
                            )
                        ],
                    },
                ),
            ],
        ),
        migrations.RunPython(content_types_forwards, content_types_backwards),
    ]
