"""The metric families the apps count into, served at ``/metrics`` (``memoryconsole.metrics``).

Defined here, below every app, so that the app that sees an event counts it where it happens
(the search that abstains, the worker that embeds) without importing the layer that serves
them. Only counters and histograms: what is a level rather than a count (queues, backlogs)
is read from the database when ``/metrics`` is scraped, never kept in a process.

Labels hold fixed vocabularies only (a route's pattern, a method, a status, an abstention's
reason): never a tenant, an id or anything an agent wrote, so the number of series stays
bounded and nothing personal reaches a scraper.

Several processes (gunicorn's workers, the Celery worker) count into one directory when
``PROMETHEUS_MULTIPROC_DIR`` is set before this module is imported: ``up`` sets it for its
children, and gunicorn's configuration for its workers (``memoryconsole.gunicorn_conf``).
"""

from __future__ import annotations

from prometheus_client import Counter, Histogram

HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})

http_requests = Counter(
    "memoryconsole_http_requests",
    "Requests answered, by route pattern, method and status.",
    ["route", "method", "status"],
)
# No status label: it would multiply every bucket by every status; the counter above has it.
http_request_duration = Histogram(
    "memoryconsole_http_request_duration_seconds",
    "Time from the request reaching the application to its response, by route and method.",
    ["route", "method"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
)
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


def http_method_label(method: str | None) -> str:
    """The method as a label: any other verb is ``other``, so clients cannot add series."""
    method = (method or "").upper()
    return method if method in HTTP_METHODS else "other"


replica_reads = Counter(
    "memoryconsole_replica_reads",
    "Lag-tolerant reads (apps.tenancy.replicas) by where they were served: replica; primary "
    "because no replica had replayed the credential's last write (behind), none was in rotation "
    "(unavailable), or the replica failed during the read (failed).",
    ["served_by", "reason"],
)
