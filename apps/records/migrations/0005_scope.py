"""Scopes become models, and a fact's identity gains one: ``(tenant, subject, key, scope)``.

The scope column starts empty; 0006 splits existing facts by the scopes of their versions
and 0007 makes it required with the new identity. (Three migrations: PostgreSQL refuses to
alter a table in the transaction that queued constraint checks on it.)
"""

import uuid

import django.db.models.deletion
from django.db import migrations, models

from apps.tenancy.rls import EnableTenantRLS


class Migration(migrations.Migration):
    dependencies = [
        ("records", "0004_candidate_filter_index"),
        ("tenancy", "0004_tenant_summaries_written"),
    ]

    operations = [
        migrations.CreateModel(
            name="Scope",
            fields=[
                (
                    "id",
                    models.UUIDField(
                        default=uuid.uuid4, editable=False, primary_key=True, serialize=False
                    ),
                ),
                ("domain", models.CharField(max_length=100)),
                ("task_type", models.CharField(blank=True, max_length=100)),
                ("conditions", models.JSONField(blank=True, default=dict)),
                ("canonical", models.TextField(editable=False)),
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
                        fields=["tenant", "domain", "task_type"], name="scope_tenant_domain"
                    )
                ],
                "constraints": [
                    models.UniqueConstraint(fields=("tenant", "canonical"), name="scope_identity")
                ],
            },
        ),
        EnableTenantRLS("scope"),
        migrations.RemoveConstraint(model_name="fact", name="fact_identity"),
        migrations.AddField(
            model_name="fact",
            name="scope",
            field=models.ForeignKey(
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="facts",
                to="records.scope",
            ),
        ),
        migrations.AlterField(
            model_name="conflict",
            name="resolution",
            field=models.CharField(
                blank=True,
                choices=[
                    ("keep_current", "Keep Current"),
                    ("accept_new", "Accept New"),
                    ("corrected", "Corrected"),
                    ("not_a_conflict", "Not A Conflict"),
                ],
                max_length=16,
            ),
        ),
    ]
