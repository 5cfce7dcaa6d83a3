"""An agent's own vector on a record write (``vector``, for a tenant whose embedding model is
``client-<dim>``).

The field is the write contract's; what a vector must be and where it is stored are the
derivations app's, above records, so it registers both in its ``AppConfig.ready``
(apps/derivations/apps.py). A write carrying a vector with nothing registered raises rather
than dropping the vector.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from apps.tenancy.models import Tenant

VECTOR_FIELD = "vector"


@dataclass(frozen=True)
class ClientVectors:
    # split(body, tenant=): the body without its vector, the vector checked against the
    # tenant's model (or None), and the errors under VECTOR_FIELD.
    split: Callable[..., tuple[Any, list[float] | None, dict[str, list[str]]]]
    # store(tenant=, vector=, record=): the vector as the record's embedding, in the caller's
    # transaction.
    store: Callable[..., None]


_registered: list[ClientVectors] = []


def client_vectors_register(hooks: ClientVectors) -> None:
    _registered[:] = [hooks]


def _hooks() -> ClientVectors:
    if not _registered:
        raise LookupError("No app takes client vectors: apps.derivations is not installed.")
    return _registered[0]


def client_vector_split(
    body: Any, *, tenant: Tenant
) -> tuple[Any, list[float] | None, dict[str, list[str]]]:
    return _hooks().split(body, tenant=tenant)


def client_vector_store(*, tenant: Tenant, vector: Sequence[float], record: Any) -> None:
    _hooks().store(tenant=tenant, vector=vector, record=record)
