"""Platform tasks (each app keeps its own domain tasks in its ``tasks.py``)."""

from __future__ import annotations

from typing import Any

from django.db import connection

from .celery import app


@app.task(name="memoryconsole.tenant_probe")
def tenant_probe() -> dict[str, Any]:
    """Report which tenant this task runs as and how many tenant rows it can see.

    A diagnostic with no side effects: it returns identifiers and counts, never content.
    ``tests/test_celery_context.py`` uses it to prove the tenant travels with the message
    and that a task sent without a tenant sees no tenant rows.
    """
    from apps.tenancy.context import TENANT_SETTING, current_tenant_id
    from apps.tenancy.models import Membership

    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting(%s, true)", [TENANT_SETTING])
        row = cursor.fetchone()
    tenant_id = current_tenant_id()
    return {
        "tenant": str(tenant_id) if tenant_id else None,
        "database_tenant": (row[0] or None) if row else None,
        "memberships": Membership.objects.count(),
    }


@app.task(name="memoryconsole.broker_delivered_purge")
def broker_delivered_purge_task() -> int:
    """Remove the SQL broker's delivered messages (beat, every few minutes)."""
    from .celery import broker_delivered_purge

    return broker_delivered_purge()
