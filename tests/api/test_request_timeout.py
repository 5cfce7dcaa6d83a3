"""A request blocked past its statement timeout (a lock held by other work) answers 503 with
``Retry-After`` and rolls back, instead of running until gunicorn kills its worker."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection, transaction
from django.urls import reverse

from apps.api.middleware import _statement_timeout_set
from apps.core.database import owner_connection
from apps.records.models import Fact, MemoryRecord
from apps.tenancy.context import tenant_scope
from tests.records.factories import body

from .support import assert_problem

# Real transactions: the timeout is set at the start of the request's own transaction.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def short_timeout(settings: Any) -> None:
    settings.REQUEST_STATEMENT_TIMEOUT = 0.3


@pytest.fixture
def table_locked() -> Iterator[Any]:
    """Another session holds a lock on the records table (as an index build would) until the
    test ends: reads go on, every insert waits."""

    def lock(table: str, mode: str) -> None:
        holder.execute("BEGIN")
        holder.execute(f'LOCK TABLE "{table}" IN {mode} MODE')

    holder = owner_connection()
    try:
        yield lock
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_a_write_blocked_by_a_lock_answers_503_and_stores_nothing(
    agent, short_timeout, table_locked, caplog
):
    table_locked(MemoryRecord._meta.db_table, "SHARE")
    response = agent.post("/api/v1/records", body(), headers={"Idempotency-Key": "blocked-1"})
    problem = assert_problem(response, 503)
    assert problem["type"].endswith("/database-timeout")
    assert "ran out of time" in problem["detail"]
    assert response["Retry-After"] == "5"
    # The fact row inserted before the blocked statement went with the rollback.
    with tenant_scope(agent.tenant.pk):
        assert not Fact.objects.exists()
        assert not MemoryRecord.objects.exists()
    [logged] = [r for r in caplog.records if "ran out of time" in r.getMessage()]
    assert logged.getMessage() == "request ran out of time in the database: QueryCanceled"
    assert logged.exc_info is None


def test_the_console_shows_a_503_page_when_a_page_waits_too_long(
    client, member, tenant, short_timeout, table_locked
):
    client.force_login(member)
    table_locked(MemoryRecord._meta.db_table, "ACCESS EXCLUSIVE")
    response = client.get(reverse("console:memories", kwargs={"tenant_slug": tenant.slug}))
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert "The request took too long" in response.content.decode()


def test_the_timeout_ends_with_the_request(agent, short_timeout):
    assert agent.get("/api/v1/records").status_code == 200
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        assert cursor.fetchone()[0] == "0"


def test_the_setting_goes_in_the_first_statements_query_string(short_timeout):
    """Where parameters are bound on the client, the setting rides ahead of the transaction's
    first statement (one round trip), and the cursor reads that statement's own rows."""
    with (
        transaction.atomic(),
        connection.execute_wrapper(_statement_timeout_set),
        connection.cursor() as cursor,
    ):
        cursor.execute("SELECT current_setting('statement_timeout'), %s", ["first"])
        assert cursor.fetchall() == [("300ms", "first")]
        cursor.execute("UPDATE records_fact SET last_version = last_version WHERE false")
        assert cursor.rowcount == 0
