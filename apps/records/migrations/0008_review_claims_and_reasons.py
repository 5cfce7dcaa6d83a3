"""Claims on promotion requests and canned review reasons, both tenant tables under RLS."""

import uuid

import django.db.models.deletion
from django.db import migrations, models

from apps.tenancy.rls import EnableTenantRLS


class Migration(migrations.Migration):
    dependencies = [
        ("records", "0007_fact_scope_required"),
        ("tenancy", "0008_review_lead"),
    ]

    operations = [
        migrations.CreateModel(
            name="ReviewClaim",
            fields=[
                (
                    "id",
                    models.UUIDField(
                        default=uuid.uuid4, editable=False, primary_key=True, serialize=False
                    ),
                ),
                ("holder_id", models.CharField(max_length=64)),
                ("holder_label", models.CharField(max_length=200)),
                ("claimed_at", models.DateTimeField()),
                ("expires_at", models.DateTimeField()),
                (
                    "request",
                    models.OneToOneField(
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
                "indexes": [
                    models.Index(
                        fields=["tenant", "holder_id", "expires_at"], name="claim_tenant_holder"
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
                        default=uuid.uuid4, editable=False, primary_key=True, serialize=False
                    ),
                ),
                (
                    "decision",
                    models.CharField(
                        choices=[("approve", "Approving"), ("reject", "Rejecting")], max_length=16
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
                "indexes": [
                    models.Index(
                        fields=["tenant", "decision", "position"], name="review_reason_order"
                    )
                ],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("tenant", "decision", "text"), name="review_reason_once"
                    )
                ],
            },
        ),
        EnableTenantRLS("reviewclaim"),
        EnableTenantRLS("reviewreason"),
    ]
