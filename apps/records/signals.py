"""What the records app asks of the apps above it (contracts: apps/core/contracts.py).

Runs are the state app's and derived data (summaries, embeddings, vectors) the derivations
app's, both above records; each receives these in its ``AppConfig.ready``. Every one but
:data:`embed_record` is required: start-up fails (``memoryconsole.E001``) and a send raises
without a receiver. A version's embedding needs none: the write queues it itself (an outbox
row: apps/work/queued.py), and a receiver only does it sooner.
"""

from __future__ import annotations

from apps.core.contracts import Contract

#: ``tenant``, ``run_id`` -> whether ``run_id`` is an open run of ``tenant``, the run then
#: locked (``FOR NO KEY UPDATE``) until the caller's transaction ends (apps/state/receivers.py).
session_run_open = Contract(
    "records.session_run_open",
    required="a session-retained write must name an open run of its tenant",
)

#: ``record_id``, ``sensitivity`` -> how many artifacts derived from the version
#: ``record_id`` were raised to ``sensitivity`` (apps/derivations/receivers.py).
derived_class_raise = Contract(
    "records.derived_class_raise",
    required="a summary never keeps a lower class than what it cites",
)

#: ``record`` -> the artifacts derived from it, by kind (apps/derivations/receivers.py).
derived_artifacts = Contract(
    "records.derived_artifacts",
    required="a record's detail never shows a version as if nothing had been derived from it",
)

#: ``raw``, ``tenant`` -> ``(vector or None, errors)``: an agent's vector on a write
#: (``vector``) checked against the tenant's embedding model (apps/derivations/receivers.py).
client_vector_check = Contract(
    "records.client_vector_check",
    required="a write's vector is checked against its tenant's model, never dropped",
)

#: ``tenant``, ``vector``, ``record`` -> None: the checked vector stored as the record's
#: embedding, in the caller's transaction (apps/derivations/receivers.py).
client_vector_store = Contract(
    "records.client_vector_store",
    required="a write's vector is stored as its record's embedding, never dropped",
)

#: ``subject`` (a version), ``stored`` -> True where its embedding is made at once, in the
#: write's transaction (the tenant's model embeds at write), instead of by the worker from the
#: row the write queued (apps/work/queued.py; apps/derivations/receivers.py). Optional.
embed_record = Contract("records.embed_record")
