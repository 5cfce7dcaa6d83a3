"""What the API layer asks of the apps above it (contracts: apps/core/contracts.py)."""

from __future__ import annotations

from apps.core.contracts import Contract

#: ``pk`` -> whether the object ``pk`` of the current tenant has expired since a stored
#: response described it (records: a version or a conflict; derivations: a summary citing an
#: expired version). Optional: the API layer knows none of their models, and a stored
#: response whose content no app calls expired is replayed.
stored_response_expired = Contract("api.stored_response_expired")
