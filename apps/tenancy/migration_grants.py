"""Giving a new tenant permission to the members who already hold a role, from a migration.

A permission added to ``Tenant.Meta.permissions`` reaches new members through their role
(:mod:`apps.tenancy.permissions`); existing members get it from the migration that adds it.
Migrations call :func:`grant_to_role` with their historical ``apps``, so it reads only the
tables it names and nothing of the current models. Row-level security applies to the
migrating role too: memberships are read tenant by tenant under each tenant's setting.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def grant_to_role(codename: str, name: str, role: str = "admin") -> Callable[[Any, Any], None]:
    """A ``RunPython`` function giving ``codename`` on their tenant to every member with
    ``role``."""

    def grant(apps: Any, schema_editor: Any) -> None:
        ContentType = apps.get_model("contenttypes", "ContentType")
        Permission = apps.get_model("auth", "Permission")
        UserObjectPermission = apps.get_model("guardian", "UserObjectPermission")
        content_type, _ = ContentType.objects.get_or_create(app_label="tenancy", model="tenant")
        permission, _ = Permission.objects.get_or_create(
            codename=codename, content_type=content_type, defaults={"name": name}
        )
        with schema_editor.connection.cursor() as cursor:
            cursor.execute("SELECT id FROM tenancy_tenant")
            tenants = [tenant_id for (tenant_id,) in cursor.fetchall()]
            for tenant_id in tenants:
                cursor.execute(
                    "SELECT set_config('memoryconsole.tenant_id', %s, true)", [str(tenant_id)]
                )
                cursor.execute(
                    "SELECT user_id FROM tenancy_membership WHERE tenant_id = %s AND role = %s",
                    [tenant_id, role],
                )
                for (user_id,) in cursor.fetchall():
                    UserObjectPermission.objects.get_or_create(
                        permission=permission,
                        content_type=content_type,
                        object_pk=str(tenant_id),
                        user_id=user_id,
                    )
            cursor.execute("SELECT set_config('memoryconsole.tenant_id', '', true)")

    grant.__name__ = f"grant_{codename}_to_{role}s"
    return grant
