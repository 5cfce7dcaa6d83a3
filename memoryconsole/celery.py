"""The Celery app. Tasks run in their tenant's context, carried in a message header.

``TenantTask`` copies the current tenant into the ``memoryconsole_tenant`` header when a task
is sent and, in the worker, runs the task body in one transaction with that tenant active. A
task sent with no tenant runs with none, and so sees no tenant rows (fail-closed).
"""

from __future__ import annotations

import os
from typing import Any

from celery import Celery, Task

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryconsole.settings")

TENANT_HEADER = "memoryconsole_tenant"


class TenantTask(Task):  # type: ignore[type-arg]
    """Base task: carries the sender's tenant and restores it around the task body."""

    def apply_async(  # type: ignore[override]
        self, args: Any = None, kwargs: Any = None, **options: Any
    ) -> Any:
        from apps.tenancy.context import current_tenant_id

        tenant_id = current_tenant_id()
        if tenant_id is not None:
            headers = dict(options.pop("headers", None) or {})
            headers.setdefault(TENANT_HEADER, str(tenant_id))
            options["headers"] = headers
        return super().apply_async(args, kwargs, **options)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from apps.tenancy.context import tenant_scope

        tenant_id = self.request.get(TENANT_HEADER) if self.request else None
        if tenant_id is None and self.request and self.request.headers:
            tenant_id = self.request.headers.get(TENANT_HEADER)
        if tenant_id is None:
            return super().__call__(*args, **kwargs)
        with tenant_scope(tenant_id):
            return super().__call__(*args, **kwargs)


app = Celery("memoryconsole", task_cls=TenantTask)
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


def broker_status() -> str:
    """``ok (<transport>)`` when the broker answers, else ``unreachable (<transport>)``."""
    transport = app.conf.broker_url.split("://", 1)[0].split("+", 1)[0]
    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
    except Exception:
        return f"unreachable ({transport})"
    return f"ok ({transport})"
