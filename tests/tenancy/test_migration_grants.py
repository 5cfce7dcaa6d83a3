"""The migrations that add a tenant permission give it to the members already holding the
role (``apps.tenancy.migration_grants``), tenant by tenant under row-level security."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from django.apps import apps
from django.db import connection
from guardian.models import UserObjectPermission

from apps.tenancy.migration_grants import grant_to_role
from apps.tenancy.models import Role
from apps.tenancy.services import tenant_create
from tests.factories import person

PERMISSIONS = ("erase_memories", "run_evaluations", "manage_review")


def _granted(user: Any, tenant: Any) -> set[str]:
    rows = UserObjectPermission.objects.filter(user=user, object_pk=str(tenant.pk))
    return set(rows.values_list("permission__codename", flat=True)) & set(PERMISSIONS)


@pytest.mark.django_db
def test_each_admin_of_every_tenant_gets_the_new_permission_and_no_one_else(
    tenant: Any, owner: Any, member: Any
) -> None:
    other = tenant_create(slug="initech", name="Initech")
    other_admin = person(other, "otto", Role.ADMIN)
    reviewer_there = person(other, "rita", Role.REVIEWER)
    UserObjectPermission.objects.filter(permission__codename__in=PERMISSIONS).delete()
    assert _granted(owner, tenant) == set()

    # Row-level security holds for this role as for the migrating one: outside a tenant's
    # setting, no membership is visible.
    editor = SimpleNamespace(connection=connection)
    for codename in PERMISSIONS:
        grant_to_role(codename, codename.replace("_", " "))(apps, editor)
        grant_to_role(codename, codename.replace("_", " "))(apps, editor)  # twice: once

    assert _granted(owner, tenant) == set(PERMISSIONS)
    assert _granted(other_admin, other) == set(PERMISSIONS)
    assert _granted(owner, other) == set()  # an admin of one tenant only
    assert _granted(member, tenant) == set()
    assert _granted(reviewer_there, other) == set()
    assert UserObjectPermission.objects.filter(permission__codename__in=PERMISSIONS).count() == 6
