"""The base of every task: it runs in its sender's tenant, carried in a message header.

``TenantTask`` copies the current tenant into the ``memoryconsole_tenant`` header when a task
is sent and, in the worker, runs the task body in one transaction with that tenant active. A
task sent with no tenant runs with none, and so sees no tenant rows (fail-closed).

``delay_on_commit`` / ``apply_async_on_commit`` capture the tenant when they are *called*, not
when the transaction commits: by commit time the ``tenant_scope`` that wanted the task has
usually been left, and the task would otherwise be sent without a tenant.

The Celery app (memoryconsole/celery.py) names this class as its ``task_cls``; the apps
declare their tasks with ``shared_task``. ``tests/test_celery_context.py`` proves both against
a real worker.
"""

from __future__ import annotations

import functools
from typing import Any

from celery.contrib.django.task import DjangoTask
from django.db import connection, transaction

from .context import current_tenant_id, tenant_scope
from .models import Tenant

TENANT_HEADER = "memoryconsole_tenant"


def _with_tenant_header(options: dict[str, Any], *, pin: bool = False) -> dict[str, Any]:
    """``options`` with the current tenant in the headers (an explicit header wins).

    The tenant counts only inside a transaction: that is where ``activate_tenant`` makes it
    current, and a value still set after the transaction ended is stale, never to be sent.
    ``pin`` records "no tenant" too (an empty header), so a later send cannot pick up
    whatever tenant happens to be current then.
    """
    tenant_id = current_tenant_id() if connection.in_atomic_block else None
    if tenant_id is None and not pin:
        return options
    headers = dict(options.pop("headers", None) or {})
    headers.setdefault(TENANT_HEADER, str(tenant_id) if tenant_id else "")
    return {**options, "headers": headers}


class TenantTask(DjangoTask):  # type: ignore[type-arg]
    """Base task: carries the sender's tenant and restores it around the task body."""

    def apply_async(  # type: ignore[override]
        self, args: Any = None, kwargs: Any = None, **options: Any
    ) -> Any:
        return super().apply_async(args, kwargs, **_with_tenant_header(options))

    # The stubs say these return an AsyncResult; Django's on_commit returns nothing.
    def apply_async_on_commit(self, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        """``apply_async`` after the transaction commits, for the tenant current *now*."""
        call = functools.partial(self.apply_async, *args, **_with_tenant_header(kwargs, pin=True))
        transaction.on_commit(call)

    def delay_on_commit(self, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        """``delay`` after the transaction commits, for the tenant current *now*."""
        self.apply_async_on_commit(args, kwargs)

    def for_each_tenant(self) -> int:
        """Send this task once per tenant, each carrying its tenant (after the fan-out's
        commit); returns how many were sent. The periodic per-tenant sweeps start here."""
        count = 0
        for tenant_id in Tenant.objects.values_list("pk", flat=True):
            with tenant_scope(tenant_id):
                self.delay_on_commit()
            count += 1
        return count

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        tenant_id = self._tenant_from_request()
        if tenant_id is None:
            return super().__call__(*args, **kwargs)
        with tenant_scope(tenant_id):
            return super().__call__(*args, **kwargs)

    def _tenant_from_request(self) -> str | None:
        request = self.request
        if request is None:
            return None
        # Message protocol 2 exposes custom headers as request attributes; keep the
        # ``headers`` mapping as a fallback (eager calls, older protocol).
        tenant_id = request.get(TENANT_HEADER)
        if tenant_id is None and request.headers:
            tenant_id = request.headers.get(TENANT_HEADER)
        return str(tenant_id) if tenant_id else None
