"""Restricted memories need a permission: ``view_restricted`` for people (admins and reviewers
hold it by role and get it here; an admin grants it to a member or auditor). Agent
credentials get ``sees_restricted``: every existing one keeps seeing them (True), and an admin
can issue a narrower one that does not."""

from django.db import migrations, models

from apps.tenancy.migration_grants import grant_to_role

VIEW_RESTRICTED = "view_restricted"
NAME = "See memories of the restricted sensitivity class"


class Migration(migrations.Migration):
    dependencies = [
        ("tenancy", "0009_tenant_embedding_model_e5_small"),
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
                    ("view_restricted", "See memories of the restricted sensitivity class"),
                ],
            },
        ),
        migrations.AddField(
            model_name="membership",
            name="sees_restricted",
            field=models.BooleanField(default=False),
        ),
        migrations.AddField(
            model_name="agentcredential",
            name="sees_restricted",
            field=models.BooleanField(default=True),
        ),
        migrations.RunPython(
            grant_to_role(VIEW_RESTRICTED, NAME, "admin"), migrations.RunPython.noop
        ),
        migrations.RunPython(
            grant_to_role(VIEW_RESTRICTED, NAME, "reviewer"), migrations.RunPython.noop
        ),
    ]
