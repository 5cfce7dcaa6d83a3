"""The metric families the apps count into, served at ``/metrics`` (``memoryconsole.metrics``).

Defined here, below every app, so that the app that sees an event counts it where it happens
(the search that abstains, the worker that embeds) without importing the layer that serves
them; the requests' own families are counted above every app, by the request log, and defined
there (``memoryconsole.request_log``). Only counts: what is a level rather than a count
(queues, backlogs) is read from the database when ``/metrics`` is scraped, never kept in a
process.

Labels hold fixed vocabularies only (an abstention's reason, a drain's outcome): never a
tenant, an id or anything an agent wrote, so the number of series stays bounded and nothing
personal reaches a scraper.

Several processes (gunicorn's workers, the Celery worker) count into one directory when
``PROMETHEUS_MULTIPROC_DIR`` is set before this module is imported: ``up`` sets it for its
children, and gunicorn's configuration for its workers (``memoryconsole.gunicorn_conf``).
"""

from __future__ import annotations

from prometheus_client import Counter

search_abstentions = Counter(
    "memoryconsole_search_abstentions",
    "Searches that returned nothing and said why, by reason.",
    ["reason"],
)
embedding_rows = Counter(
    "memoryconsole_embedding_rows",
    "Queued embeddings the worker's drain committed (finished), gave back (deferred: their "
    "source was locked) or failed, by outcome.",
    ["outcome"],
)
replica_reads = Counter(
    "memoryconsole_replica_reads",
    "Lag-tolerant reads (apps.tenancy.replicas) by where they were served: replica; primary "
    "because no replica had replayed the credential's last write (behind), none was in rotation "
    "(unavailable), or the replica failed during the read (failed).",
    ["served_by", "reason"],
)
