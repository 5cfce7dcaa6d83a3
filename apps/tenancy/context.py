"""The ambient tenant context, enforced by PostgreSQL row-level security.

Every tenant table has a policy comparing ``tenant_id`` with the transaction-local setting
``memoryconsole.tenant_id``. The application sets it with ``set_config(..., is_local=true)``
(the function form of ``SET LOCAL``) inside the transaction of a request or a task, so it
disappears at commit or rollback and can never leak to the next user of a pooled connection.
Without it, every policy compares with NULL and a query returns no rows: fail-closed.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from contextvars import ContextVar

from django.db import DatabaseError, connection, transaction
from django.http import HttpRequest, HttpResponse

TENANT_SETTING = "memoryconsole.tenant_id"
TOKEN_HASH_SETTING = "memoryconsole.token_hash"  # noqa: S105 - a setting name
USER_SETTING = "memoryconsole.user_id"

_current_tenant: ContextVar[uuid.UUID | None] = ContextVar("memoryconsole_tenant", default=None)


class TenantContextError(RuntimeError):
    """Raised when tenant context is used outside a transaction."""


def _set_local(name: str, value: str) -> None:
    if not connection.in_atomic_block:
        raise TenantContextError(
            f"{name} can only be set inside a transaction (it is transaction-local)"
        )
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config(%s, %s, true)", [name, value])


def activate_tenant(tenant_id: uuid.UUID | str) -> None:
    """Make ``tenant_id`` the tenant for the rest of the current transaction."""
    value = tenant_id if isinstance(tenant_id, uuid.UUID) else uuid.UUID(str(tenant_id))
    _set_local(TENANT_SETTING, str(value))
    _current_tenant.set(value)


def tenant_activated(tenant_id: uuid.UUID) -> None:
    """Record on the Python side a tenant a statement entered with ``set_config`` (the API's
    credential lookup enters the credential's tenant as it reads the row)."""
    _current_tenant.set(tenant_id)


def deactivate_tenant() -> None:
    """Forget the Python-side tenant (the database setting ends with its transaction)."""
    _current_tenant.set(None)


def current_tenant_id() -> uuid.UUID | None:
    return _current_tenant.get()


def tenant_carried() -> str:
    """The value of ``TENANT_SETTING`` for a transaction this request opens on another
    connection (a read replica, :mod:`apps.tenancy.replicas`): the current tenant, or empty,
    under which every policy compares with NULL (fail-closed, as on the primary)."""
    tenant = _current_tenant.get()
    return str(tenant) if tenant is not None else ""


def expose_credential_lookup(token_hash: str) -> None:
    """Let this transaction see the one credential whose token hashes to ``token_hash``."""
    _set_local(TOKEN_HASH_SETTING, token_hash)


def expose_memberships_of(user_id: int) -> None:
    """Let this transaction see ``user_id``'s memberships in every tenant (tenant switcher)."""
    _set_local(USER_SETTING, str(user_id))


@contextmanager
def tenant_scope(tenant_id: uuid.UUID | str) -> Iterator[None]:
    """Run a block in its own transaction (or savepoint) as ``tenant_id``.

    Restores the enclosing tenant afterwards, so a nested scope cannot leave the outer
    transaction pointing at another tenant.
    """
    previous = _current_tenant.get()
    # The outermost scope's transaction ends with the block, and the setting with it.
    nested = connection.in_atomic_block
    with transaction.atomic():
        token = _current_tenant.set(None)
        try:
            activate_tenant(tenant_id)
            yield
        finally:
            _current_tenant.reset(token)
            if nested and connection.in_atomic_block and connection.is_usable():
                # A failed transaction rolls back (and forgets the setting) anyway.
                with suppress(DatabaseError):
                    _set_local(TENANT_SETTING, str(previous) if previous else "")


class TenantContextResetMiddleware:
    """Forget the Python-side tenant after each request (the database side ends with the
    request's transaction), so a thread never carries one request's tenant into the next."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        deactivate_tenant()
        try:
            return self.get_response(request)
        finally:
            deactivate_tenant()
