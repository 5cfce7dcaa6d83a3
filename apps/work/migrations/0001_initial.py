"""The outbox, moved from derivations with its table as it is."""

import uuid
from typing import Any

import django.db.models.deletion
from django.db import migrations, models

# The model's content type (and so its permissions and admin log entries) follows it to
# work; a database migrated from scratch has none yet (post_migrate creates them).
MOVED = ("outboxmessage",)


def content_types_forwards(apps: Any, schema_editor: Any) -> None:
    rename(apps, "derivations", "work")


def content_types_backwards(apps: Any, schema_editor: Any) -> None:
    rename(apps, "work", "derivations")


def rename(apps: Any, old: str, new: str) -> None:
    ContentType = apps.get_model("contenttypes", "ContentType")
    for model in MOVED:
        if not ContentType.objects.filter(app_label=new, model=model).exists():
            ContentType.objects.filter(app_label=old, model=model).update(app_label=new)


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("derivations", "0009_erasure_job_to_governance"),
        ("tenancy", "0011_tenant_promotion_and_read_audit_policy"),
    ]

    operations = [
        # State only: the table keeps its name (Meta.db_table), its rows, its row-level
        # security and its grants; nothing in the database changes.
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="OutboxMessage",
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
                        ("task_name", models.CharField(max_length=100)),
                        ("payload", models.JSONField(default=dict)),
                        ("object_id", models.UUIDField(blank=True, null=True)),
                        (
                            "state",
                            models.CharField(
                                choices=[
                                    ("pending", "pending"),
                                    ("published", "published"),
                                    ("done", "done"),
                                    ("dead", "dead"),
                                ],
                                default="pending",
                                max_length=16,
                            ),
                        ),
                        ("attempts", models.PositiveIntegerField(default=0)),
                        ("last_error", models.TextField(blank=True)),
                        ("created_at", models.DateTimeField()),
                        ("published_at", models.DateTimeField(blank=True, null=True)),
                        ("finished_at", models.DateTimeField(blank=True, null=True)),
                        ("available_at", models.DateTimeField(blank=True, null=True)),
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
                        "db_table": "derivations_outboxmessage",
                        "indexes": [
                            models.Index(
                                fields=["tenant", "state", "created_at"],
                                name="outbox_tenant_state",
                            ),
                            models.Index(
                                fields=["tenant", "object_id"], name="outbox_tenant_object"
                            ),
                        ],
                    },
                ),
            ],
        ),
        migrations.RunPython(content_types_forwards, content_types_backwards),
    ]
