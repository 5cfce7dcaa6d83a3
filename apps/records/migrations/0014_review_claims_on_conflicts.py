"""Review claims also hold open conflicts: a claim names a promotion request or a conflict,
exactly one of the two (``review_claim_one_item``). Existing claims all name a request, so
they satisfy the constraint as they are; the table stays under the tenant's RLS policy."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("records", "0013_search_functions_schema_qualified"),
        ("tenancy", "0011_tenant_promotion_and_read_audit_policy"),
    ]

    operations = [
        migrations.AddField(
            model_name="reviewclaim",
            name="conflict",
            field=models.OneToOneField(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="claim",
                to="records.conflict",
            ),
        ),
        migrations.AlterField(
            model_name="reviewclaim",
            name="request",
            field=models.OneToOneField(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="claim",
                to="records.promotionrequest",
            ),
        ),
        migrations.AddConstraint(
            model_name="reviewclaim",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(("conflict__isnull", True), ("request__isnull", False)),
                    models.Q(("conflict__isnull", False), ("request__isnull", True)),
                    _connector="OR",
                ),
                name="review_claim_one_item",
            ),
        ),
    ]
