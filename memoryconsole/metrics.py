"""``GET /metrics``: the Prometheus text format, for operators' scrapers only.

What it serves (docs/observability.md lists every family): the counters and histograms the
processes keep (``memoryconsole.request_log``: requests; ``apps.core.metrics``: search
abstentions, the embedding drain, replica reads), summed over every process that counts into
the multiprocess directory, and figures read from the database at each scrape (the outbox's
backlog, open conflicts, the review queue, erasure jobs by state), summed across tenants. It
reads every layer, so it sits in the project above the apps, as the health endpoint does.

Who may scrape: a request carrying ``Authorization: Bearer <MEMORYCONSOLE_METRICS_TOKEN>``
(compared in constant time), or one from a network of ``MEMORYCONSOLE_METRICS_ALLOW`` (by
default the loopback addresses, unless the instance is served beyond this machine, where a
TLS proxy on the same host would make every client look local). Anyone else gets the 404 of
a URL that does not exist.
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Iterable, Iterator
from ipaddress import IPv6Address, ip_address
from typing import Any, Protocol

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.utils import timezone
from django.utils.cache import add_never_cache_headers
from prometheus_client import REGISTRY, CollectorRegistry, Metric, multiprocess
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import GaugeMetricFamily

from apps.console.dashboard import count_of
from apps.governance.erasure_jobs import erasure_jobs_in
from apps.governance.models import ErasureJobState
from apps.review.queues import conflicts_open, promotions_pending
from apps.tenancy.context import tenant_scope
from apps.tenancy.models import Tenant
from apps.work.selectors import background_work

from .instance import METRICS_DIRECTORY_ENV


class _Collector(Protocol):
    def collect(self) -> Iterable[Metric]: ...


def scrape_allowed(request: HttpRequest) -> bool:
    """The request carries the metrics token, or comes from an allowed network."""
    token: str = settings.METRICS_TOKEN
    if token:
        scheme, _, presented = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(
            presented.strip().encode(), token.encode()
        ):
            return True
    try:
        address = ip_address(str(request.META.get("REMOTE_ADDR", "")))
    except ValueError:
        return False
    if isinstance(address, IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped  # a dual-stack listener's IPv4 client
    return any(address in network for network in settings.METRICS_ALLOW)


class DatabaseFigures:
    """Levels read from the database at scrape time, summed across tenants.

    Tenant rows are read as each tenant, one short transaction per tenant, as the health
    endpoint reads the outbox (:func:`apps.work.selectors.background_work`): row-level
    security has no tenant-less way in. The review queue and open conflicts are the console's
    queues (live versions only), counted whole; with the erasure jobs, one statement per
    tenant.
    ``memoryconsole_database_up`` is 0, and the rest absent, while the database is away.
    """

    def collect(self) -> Iterator[Metric]:
        try:
            families = list(self._families())
        except DatabaseError:
            families = []
        up = GaugeMetricFamily(
            "memoryconsole_database_up",
            "1 when this scrape could read the database's figures, else 0.",
            value=1 if families else 0,
        )
        return iter([up, *families])

    def _families(self) -> Iterator[Metric]:
        work = background_work()
        yield GaugeMetricFamily(
            "memoryconsole_outbox_waiting",
            "Committed background work (embeddings, erasure jobs...) not finished yet.",
            value=work.waiting,
        )
        yield GaugeMetricFamily(
            "memoryconsole_outbox_oldest_waiting_seconds",
            "Age of the oldest unfinished outbox item; 0 when none waits.",
            value=work.oldest_waiting_seconds or 0.0,
        )
        yield GaugeMetricFamily(
            "memoryconsole_outbox_finished_last_minute",
            "Outbox items finished in the last minute (any worker, read from the database).",
            value=work.done_last_minute,
        )
        yield GaugeMetricFamily(
            "memoryconsole_outbox_dead",
            "Outbox items whose retries ran out (the admin lists them).",
            value=work.dead,
        )
        totals = self._review_and_erasure_counts()
        yield GaugeMetricFamily(
            "memoryconsole_conflicts_open",
            "Open conflicts between live versions, awaiting a reviewer.",
            value=totals["conflicts"],
        )
        yield GaugeMetricFamily(
            "memoryconsole_review_queue",
            "Pending promotion requests of live versions, awaiting a reviewer.",
            value=totals["promotions"],
        )
        by_state = GaugeMetricFamily(
            "memoryconsole_erasure_jobs", "Erasure jobs, by state.", labels=["state"]
        )
        for state in ErasureJobState.values:
            by_state.add_metric([state], totals[f"erasure_{state}"])
        yield by_state

    @staticmethod
    def _review_and_erasure_counts() -> dict[str, int]:
        """One row of scalar subqueries (the console dashboard's ``count_of``), compiled once
        and run as each tenant: building and compiling these querysets costs more than
        running them, so it is done once per scrape, not once per tenant."""
        now = timezone.now()
        counts: dict[str, Any] = {
            "conflicts": count_of(conflicts_open(now)),
            "promotions": count_of(promotions_pending(now)),
        }
        for state in ErasureJobState.values:
            counts[f"erasure_{state}"] = count_of(erasure_jobs_in(state))
        # Any one row of the tenant table (not under row-level security) carries them.
        sql, params = Tenant.objects.values(**counts)[:1].query.sql_with_params()
        totals = dict.fromkeys(counts, 0)
        for tenant_id in Tenant.objects.values_list("pk", flat=True):
            with tenant_scope(tenant_id), connection.cursor() as cursor:
                cursor.execute(sql, params)
                names = [column.name for column in cursor.description or []]
                row = cursor.fetchone() or ()
            for name, count in zip(names, row, strict=True):
                totals[name] += count
        return totals


class _Combined:
    """Several collectors as one, for a registry built per scrape."""

    def __init__(self, *collectors: _Collector) -> None:
        self.collectors = collectors

    def collect(self) -> Iterator[Metric]:
        for collector in self.collectors:
            yield from collector.collect()


def scrape_registry() -> CollectorRegistry:
    """The processes' metrics (every process's, from the multiprocess directory when there is
    one, else this process's own) and the database's figures."""
    registry = CollectorRegistry()
    if os.environ.get(METRICS_DIRECTORY_ENV):
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        registry.register(DatabaseFigures())
    else:
        registry.register(_Combined(REGISTRY, DatabaseFigures()))
    return registry


# Not in the request's transaction: each tenant's figures are read in a transaction of its
# own, and a database that is away must still let the process metrics through.
@transaction.non_atomic_requests
def metrics(request: HttpRequest) -> HttpResponse:
    if not scrape_allowed(request):
        raise Http404
    if request.method not in {"GET", "HEAD"}:
        return HttpResponseNotAllowed(["GET", "HEAD"])
    encode, content_type = choose_encoder(request.headers.get("Accept", ""))
    body: Any = encode(scrape_registry())
    response = HttpResponse(body, content_type=content_type)
    add_never_cache_headers(response)
    return response
