"""What every model factory shares: rows of a tenant are written under that tenant's context.

Every tenant table has forced row-level security (``apps.tenancy.context``): a row can only be
inserted inside a transaction whose tenant setting names the row's tenant. A
:class:`TenantOwnedFactory` creates its row inside :func:`~apps.tenancy.context.tenant_scope`
of the row's own tenant (a savepoint when the caller is already in a transaction, which the
scope restores afterwards), so a test can create rows of any tenant from anywhere, inside a
scope of its own or not.

:func:`bulk_save` is the fast path for corpora: build rows with ``Factory.build_batch`` (or
``build``) and insert them with one ``bulk_create`` per model and tenant.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import factory
from django.db import models
from django.utils import timezone
from factory.django import DjangoModelFactory

from apps.core.actors import Actor
from apps.tenancy.context import tenant_scope

ModelT = TypeVar("ModelT", bound=models.Model)

#: The actor a service-backed factory names when the test does not say who acted.
SYSTEM = Actor.system("tests")

now = timezone.now


def tenant_id_of(kwargs: dict[str, Any]) -> Any:
    tenant = kwargs.get("tenant")
    if tenant is None:
        raise TypeError("a tenant row needs tenant=<Tenant>")
    if tenant._state.adding:
        raise ValueError(f"tenant {tenant.slug!r} is not saved: create it first")
    return tenant.pk


class TenantOwnedFactory(DjangoModelFactory[ModelT]):
    """A row of a tenant table, created under its tenant's row-level-security context.

    ``tenant`` defaults to a new tenant; related factories pass theirs down
    (``factory.SelfAttribute("..tenant")``), so a record, its fact and its scope share one.
    """

    tenant = factory.SubFactory("tests.factories.tenancy.TenantFactory")

    class Meta:
        abstract = True
        skip_postgeneration_save = True

    @classmethod
    def _create(cls, model_class: type[ModelT], *args: Any, **kwargs: Any) -> ModelT:
        with tenant_scope(tenant_id_of(kwargs)):
            return super()._create(model_class, *args, **kwargs)


def bulk_save(
    rows: Sequence[ModelT], *, batch_size: int | None = None, **options: Any
) -> list[ModelT]:
    """Insert built rows (``Factory.build_batch``) with ``bulk_create``, one statement per
    model and tenant (and ``batch_size``), each under its tenant's context. Returns the rows
    in the order given. ``options`` go to ``bulk_create`` (``ignore_conflicts``...)."""
    groups: dict[tuple[type[models.Model], Any], list[ModelT]] = {}
    for row in rows:
        tenant_field = row._meta.get_field("tenant")
        if tenant_field.is_cached(row):
            tenant_id_of({"tenant": row.tenant})
        groups.setdefault((type(row), row.tenant_id), []).append(row)
    for (model, tenant_id), group in groups.items():
        with tenant_scope(tenant_id):
            model._default_manager.bulk_create(group, batch_size=batch_size, **options)
    return list(rows)
