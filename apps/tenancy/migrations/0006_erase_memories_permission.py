from django.db import migrations

from apps.tenancy.migration_grants import grant_to_role

ERASE = "erase_memories"


class Migration(migrations.Migration):
    dependencies = [
        ("tenancy", "0005_tenant_run_idle_close_after"),
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
                ],
            },
        ),
        migrations.RunPython(
            grant_to_role(ERASE, "Erase by subject, owner or consent across the tenant"),
            migrations.RunPython.noop,
        ),
    ]
