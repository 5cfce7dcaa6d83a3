"""Review leads: the tenant's claim length, and a permission of their own (admins hold it)."""

import datetime

from django.db import migrations, models

from apps.tenancy.migration_grants import grant_to_role

LEAD = "manage_review"


class Migration(migrations.Migration):
    dependencies = [
        ("tenancy", "0007_run_evaluations_permission"),
        ("guardian", "0001_initial"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("auth", "0012_alter_user_first_name_max_length"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="tenant",
            options={
                "ordering": ["slug"],
                "permissions": [
                    ("view_memories", "View the tenant's memories"),
                    ("delete_memories", "Delete and redact the tenant's memories"),
                    ("erase_memories", "Erase by subject, owner or consent across the tenant"),
                    ("review_promotions", "Approve or reject promotion requests"),
                    ("resolve_conflicts", "Resolve conflicts between versions"),
                    ("view_audit", "Browse the audit log and deletion receipts"),
                    ("manage_credentials", "Issue and revoke agent credentials"),
                    ("manage_members", "Manage memberships and roles"),
                    ("manage_retention", "Edit retention rules and legal holds"),
                    ("run_evaluations", "Run evaluations of the memory in a sandbox"),
                    (
                        "manage_review",
                        "Lead the review: canned reasons, claims, reviewers' throughput",
                    ),
                ],
            },
        ),
        migrations.AddField(
            model_name="tenant",
            name="review_claim_duration",
            field=models.DurationField(
                default=datetime.timedelta(seconds=1800),
                help_text="How long a reviewer's claim on promotion requests lasts before others may take them (claiming again renews it).",
            ),
        ),
        migrations.AddConstraint(
            model_name="tenant",
            constraint=models.CheckConstraint(
                condition=models.Q(("review_claim_duration__gt", datetime.timedelta(0))),
                name="tenant_review_claim_duration_positive",
            ),
        ),
        migrations.RunPython(
            grant_to_role(LEAD, "Lead the review: canned reasons, claims, reviewers' throughput"),
            migrations.RunPython.noop,
        ),
    ]
