"""Tenant isolation is enforced by PostgreSQL itself, not by query filters."""

from __future__ import annotations

import pytest
from django.db import DatabaseError, connection, transaction

from apps.audit.models import AuditEvent
from apps.tenancy.context import activate_tenant, tenant_scope
from apps.tenancy.models import AgentCredential, Membership

pytestmark = pytest.mark.django_db


def test_it_returns_no_rows_without_tenant_context(tenant, other_tenant, owner, outsider):
    with transaction.atomic():
        assert AuditEvent.objects.count() == 0
        assert Membership.objects.count() == 0
        assert AgentCredential.objects.count() == 0


def test_it_hides_other_tenants_rows_from_unfiltered_queries(tenant, other_tenant, owner, outsider):
    with tenant_scope(tenant.pk):
        tenants_seen = set(AuditEvent.objects.values_list("tenant_id", flat=True))
        members_seen = set(Membership.objects.values_list("tenant_id", flat=True))
    assert tenants_seen == {tenant.pk}
    assert members_seen == {tenant.pk}


def test_it_refuses_to_insert_a_row_for_another_tenant(tenant, other_tenant, django_user_model):
    user = django_user_model.objects.create_user("intruder")
    with pytest.raises(DatabaseError, match="row-level security"), tenant_scope(tenant.pk):
        Membership.objects.create(tenant=other_tenant, user=user, role="admin")


def test_it_refuses_to_move_a_row_to_another_tenant(tenant, other_tenant, owner):
    with pytest.raises(DatabaseError, match="row-level security"), tenant_scope(tenant.pk):
        Membership.objects.filter(user=owner).update(tenant=other_tenant)


def test_it_cannot_update_or_delete_other_tenants_rows(tenant, other_tenant, outsider):
    with tenant_scope(tenant.pk):
        assert Membership.objects.filter(tenant=other_tenant).update(role="member") == 0
        assert Membership.objects.filter(tenant=other_tenant).delete()[0] == 0
    with tenant_scope(other_tenant.pk):
        assert Membership.objects.get(user=outsider).role == "admin"


@pytest.mark.django_db(transaction=True)
def test_it_forgets_the_tenant_when_the_transaction_ends(tenant, owner):
    with transaction.atomic():
        activate_tenant(tenant.pk)
        assert Membership.objects.count() == 1
    with transaction.atomic():
        assert Membership.objects.count() == 0


def test_it_restores_the_outer_tenant_after_a_nested_scope(tenant, other_tenant, owner, outsider):
    with tenant_scope(tenant.pk):
        with tenant_scope(other_tenant.pk):
            assert list(Membership.objects.values_list("user", flat=True)) == [outsider.pk]
        assert list(Membership.objects.values_list("user", flat=True)) == [owner.pk]


def test_it_ignores_a_tenant_setting_made_at_session_level(tenant, owner):
    """Only the transaction-local setting counts; raw SQL without it still sees nothing."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM tenancy_membership")
        assert cursor.fetchone()[0] == 0
