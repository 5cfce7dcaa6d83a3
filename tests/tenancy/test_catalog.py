"""The database catalog proves the isolation guarantee for every table, present and future."""

from __future__ import annotations

import pytest
from django.conf import settings

pytestmark = pytest.mark.django_db


def _tenant_tables(conn):
    return [
        row[0]
        for row in conn.execute(
            """
            SELECT c.relname FROM pg_class c
            JOIN pg_namespace n ON n.oid = c.relnamespace
            JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'tenant_id'
            WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND NOT a.attisdropped
            """
        )
    ]


def test_it_has_tenant_tables_to_check(owner_connection):
    assert {"tenancy_membership", "tenancy_agentcredential", "audit_auditevent"} <= set(
        _tenant_tables(owner_connection)
    )


def test_it_enables_and_forces_rls_with_a_policy_on_every_tenant_table(owner_connection):
    problems = []
    for table in _tenant_tables(owner_connection):
        enabled, forced = owner_connection.execute(
            "SELECT relrowsecurity, relforcerowsecurity FROM pg_class "
            "WHERE relname = %s AND relnamespace = 'public'::regnamespace",
            [table],
        ).fetchone()
        policies = owner_connection.execute(
            "SELECT qual, with_check FROM pg_policies WHERE tablename = %s "
            "AND policyname = 'tenant_isolation' AND cmd = 'ALL'",
            [table],
        ).fetchall()
        if not enabled:
            problems.append(f"{table}: row-level security not enabled")
        if not forced:
            problems.append(f"{table}: row-level security not forced")
        if len(policies) != 1 or "tenant_id" not in (policies[0][0] or ""):
            problems.append(f"{table}: no tenant_isolation policy")
        elif "tenant_id" not in (policies[0][1] or ""):
            problems.append(f"{table}: tenant_isolation policy has no WITH CHECK")
    assert problems == []


def test_it_gives_the_application_role_no_way_around_rls(owner_connection):
    role = settings.DATABASE_APP["USER"]
    superuser, bypass = owner_connection.execute(
        "SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = %s", [role]
    ).fetchone()
    owned = owner_connection.execute(
        "SELECT c.relname FROM pg_class c JOIN pg_roles r ON r.oid = c.relowner "
        "WHERE r.rolname = %s",
        [role],
    ).fetchall()
    truncatable = owner_connection.execute(
        "SELECT table_name FROM information_schema.role_table_grants "
        "WHERE grantee = %s AND privilege_type = 'TRUNCATE'",
        [role],
    ).fetchall()
    assert (superuser, bypass) == (False, False)
    assert owned == []
    assert truncatable == []


def test_it_runs_the_tests_as_the_application_role(django_db_blocker):
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT current_user")
        assert cursor.fetchone()[0] == settings.DATABASE_APP["USER"]


def test_it_keeps_the_audit_log_append_only_for_the_application(owner_connection):
    role = settings.DATABASE_APP["USER"]
    rights = {
        row[0]
        for row in owner_connection.execute(
            "SELECT privilege_type FROM information_schema.role_table_grants "
            "WHERE grantee = %s AND table_name = 'audit_auditevent'",
            [role],
        )
    }
    assert {"SELECT", "INSERT"} <= rights
    assert not rights & {"UPDATE", "DELETE", "TRUNCATE"}
