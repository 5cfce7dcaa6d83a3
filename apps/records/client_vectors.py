"""An agent's own vector on a record write (``vector``, for a tenant whose embedding model is
``client-<dim>``).

The field is the write contract's; what a vector must be and where it is stored are the
derivations app's, above records, which receives both contracts
(``signals.client_vector_check``, ``signals.client_vector_store``) in its
``AppConfig.ready`` (apps/derivations/receivers.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from apps.tenancy.models import Tenant

from . import signals

VECTOR_FIELD = "vector"


def client_vector_split(
    body: Any, *, tenant: Tenant
) -> tuple[Any, list[float] | None, dict[str, list[str]]]:
    """The body without its ``vector``, the vector checked against the tenant's model (None
    when absent or refused) and the errors under :data:`VECTOR_FIELD`."""
    if not isinstance(body, dict) or VECTOR_FIELD not in body:
        return body, None, {}
    rest = {name: value for name, value in body.items() if name != VECTOR_FIELD}
    if body[VECTOR_FIELD] is None:
        return rest, None, {}
    vector: list[float] | None = None
    errors: list[str] = []
    for checked, refused in signals.client_vector_check.results(
        raw=body[VECTOR_FIELD], tenant=tenant
    ):
        vector = vector if checked is None else checked
        errors += refused
    return rest, (None if errors else vector), ({VECTOR_FIELD: errors} if errors else {})


def client_vector_store(*, tenant: Tenant, vector: Sequence[float], record: Any) -> None:
    signals.client_vector_store.results(tenant=tenant, vector=vector, record=record)
