"""Review's claims and canned reasons, moved from records with their tables as they are."""

import uuid
from typing import Any

import django.db.models.deletion
from django.db import migrations, models

# The models' content types (and so their permissions and admin log entries) follow them to
# review; a database migrated from scratch has none yet (post_migrate creates them).
MOVED = (
    "reviewclaim",
    "reviewreason",
)


def content_types_forwards(apps: Any, schema_editor: Any) -> None:
    rename(apps, "records", "review")


def content_types_backwards(apps: Any, schema_editor: Any) -> None:
    rename(apps, "review", "records")


def rename(apps: Any, old: str, new: str) -> None:
    ContentType = apps.get_model("contenttypes", "ContentType")
    for model in MOVED:
        if not ContentType.objects.filter(app_label=new, model=model).exists():
            ContentType.objects.filter(app_label=old, model=model).update(app_label=new)


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("records", "0014_review_claims_on_conflicts"),
        ("tenancy", "0011_tenant_promotion_and_read_audit_policy"),
    ]

    operations = [
        # State only: the table keeps its name (Meta.db_table), its rows, its row-level
        # security and its grants; nothing in the database changes.
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="ReviewClaim",
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
                        ("holder_id", models.CharField(max_length=64)),
                        ("holder_label", models.CharField(max_length=200)),
                        ("claimed_at", models.DateTimeField()),
                        ("expires_at", models.DateTimeField()),
                        (
                            "conflict",
                            models.OneToOneField(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="claim",
                                to="records.conflict",
                            ),
                        ),
                        (
                            "request",
                            models.OneToOneField(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="claim",
                                to="records.promotionrequest",
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
                        "db_table": "records_reviewclaim",
                        "indexes": [
                            models.Index(
                                fields=["tenant", "holder_id", "expires_at"],
                                name="claim_tenant_holder",
                            )
                        ],
                        "constraints": [
                            models.CheckConstraint(
                                condition=models.Q(
                                    models.Q(
                                        ("conflict__isnull", True), ("request__isnull", False)
                                    ),
                                    models.Q(
                                        ("conflict__isnull", False), ("request__isnull", True)
                                    ),
                                    _connector="OR",
                                ),
                                name="review_claim_one_item",
                            )
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="ReviewReason",
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
                            "decision",
                            models.CharField(
                                choices=[("approve", "Approving"), ("reject", "Rejecting")],
                                max_length=16,
                            ),
                        ),
                        ("text", models.CharField(max_length=300)),
                        ("position", models.PositiveSmallIntegerField()),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
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
                        "db_table": "records_reviewreason",
                        "indexes": [
                            models.Index(
                                fields=["tenant", "decision", "position"],
                                name="review_reason_order",
                            )
                        ],
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("tenant", "decision", "text"), name="review_reason_once"
                            )
                        ],
                    },
                ),
            ],
        ),
        migrations.RunPython(content_types_forwards, content_types_backwards),
    ]
