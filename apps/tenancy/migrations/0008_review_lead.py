"""Review leads: the tenant's claim length, and a permission of their own (admins hold it)."""

import datetime
from typing import Any

from django.db import migrations, models

LEAD = "manage_review"


def grant_review_lead_to_admins(apps: Any, schema_editor: Any) -> None:
    """Leading the review (canned reasons, claim length, throughput) is a permission of its own,
    held by admins: give it to every existing admin, tenant by tenant (row-level security
    applies to the migrating role too)."""
    ContentType = apps.get_model("contenttypes", "ContentType")
    Permission = apps.get_model("auth", "Permission")
    UserObjectPermission = apps.get_model("guardian", "UserObjectPermission")
    content_type, _ = ContentType.objects.get_or_create(app_label="tenancy", model="tenant")
    permission, _ = Permission.objects.get_or_create(
        codename=LEAD,
        content_type=content_type,
        defaults={"name": "Lead the review: canned reasons, claims, reviewers' throughput"},
    )
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT id FROM tenancy_tenant")
        tenants = [tenant_id for (tenant_id,) in cursor.fetchall()]
        for tenant_id in tenants:
            cursor.execute(
                "SELECT set_config('memoryconsole.tenant_id', %s, true)", [str(tenant_id)]
            )
            cursor.execute(
                "SELECT user_id FROM tenancy_membership WHERE tenant_id = %s AND role = 'admin'",
                [tenant_id],
            )
            for (user_id,) in cursor.fetchall():
                UserObjectPermission.objects.get_or_create(
                    permission=permission,
                    content_type=content_type,
                    object_pk=str(tenant_id),
                    user_id=user_id,
                )
        cursor.execute("SELECT set_config('memoryconsole.tenant_id', '', true)")


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
        migrations.RunPython(grant_review_lead_to_admins, migrations.RunPython.noop),
    ]
