"""How fast `up` drains an embedding backlog, beside the embedder's own rate, in one run.

    .venv/bin/python benchmarks/embedding_drain.py [--records 3000]

Starts ``memoryconsole up`` as a new user would (its defaults, the embedded PostgreSQL, a
fresh data directory under a temporary home) and a tenant with the default embedder. Then:

1. **Drain**: the worker is paused (SIGSTOP on its process group), ``--records`` records are
   written through the API, the worker resumes, and the clock runs from the resume to the
   moment the last queued embedding was marked done (the outbox rows' ``finished_at``, read
   once ``/api/v1/health`` reports no waiting work). Records per second of that interval.
2. **Embedder alone**: the tenant's embedder on the same texts in this process, in calls of
   the drain's batch size (as the drain calls it) and one text per call.
3. **Storage alone** (the machine's floor for the rest of the work): the same vectors written
   again into the same table, batch by batch, by the drain's own bulk INSERT and its UPDATE
   of the rows to ``done``, in transactions rolled back: no claim, no locks, no embedder, no
   broker. Its indexes (an HNSW graph and a B-tree holding the vectors) make it the dearest
   part of an embedding for a fast embedder.

Target: the drain at least 0.8x the embedder's rate. The table also gives the ceiling one
thread could reach doing both in turn (embedder, then storage), so a drain below the target
shows whether the queue or the machine is the limit.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import signal
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.harness import progress, table
from benchmarks.product import Running, request, running_up


def _texts(count: int) -> list[str]:
    return [
        f"customer {n} prefers carrier {n % 7} for parcels to zone {n % 13}" for n in range(count)
    ]


def _django(home: Path) -> None:
    os.environ["MEMORYCONSOLE_HOME"] = str(home)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryconsole.settings")
    import django

    django.setup()


def embedder_rates(texts: list[str], batch: int, repeats: int = 3) -> tuple[float, float]:
    """Texts per second of the tenant's default embedder: in calls of ``batch`` texts, and
    one text per call; the best of ``repeats`` alternating runs of each (the machine is
    shared: the best run is the embedder's own speed)."""
    from apps.derivations.embedders import get_embedder
    from apps.tenancy.models import Tenant

    embedder = get_embedder(Tenant._meta.get_field("embedding_model").get_default())
    batched = single = 0.0
    for _ in range(repeats):
        started = time.perf_counter()
        for start in range(0, len(texts), batch):
            embedder.embed(texts[start : start + batch])
        batched = max(batched, len(texts) / (time.perf_counter() - started))
        started = time.perf_counter()
        for text in texts:
            embedder.embed([text])
        single = max(single, len(texts) / (time.perf_counter() - started))
    return batched, single


def storage_rate(tenant_slug: str, batch: int) -> float:
    """Vectors per second that the drain's own statements store, alone (see the module doc)."""
    from django.db import transaction
    from django.utils import timezone

    from apps.derivations.models import Embedding
    from apps.tenancy.context import tenant_scope
    from apps.tenancy.models import Tenant
    from apps.work.models import OutboxMessage, OutboxState

    tenant = Tenant.objects.get(slug=tenant_slug)
    with tenant_scope(tenant.pk):
        stored = list(Embedding.objects.filter(record__isnull=False).order_by("record_id"))
        rows = list(OutboxMessage.objects.values_list("pk", flat=True))
    elapsed = 0.0
    for start in range(0, len(stored), batch):
        chunk = stored[start : start + batch]
        with tenant_scope(tenant.pk):
            Embedding.objects.filter(pk__in=[e.pk for e in chunk]).delete()  # not timed
            fresh = [
                Embedding(
                    tenant_id=tenant.pk,
                    record_id=e.record_id,
                    model=e.model,
                    dimension=e.dimension,
                    vector=e.vector,
                    content_digest=e.content_digest,
                    created_at=timezone.now(),
                )
                for e in chunk
            ]
            now = timezone.now()
            started = time.perf_counter()
            Embedding.objects.bulk_create(fresh)
            OutboxMessage.objects.filter(pk__in=rows[start : start + batch]).update(
                state=OutboxState.DONE, finished_at=now
            )
            elapsed += time.perf_counter() - started
            transaction.set_rollback(True)  # the table keeps the drain's rows
    return len(stored) / elapsed


RAW_INSERT = (
    "INSERT INTO derivations_embedding (tenant_id, record_id, model, dimension, vector,"
    " content_digest, created_at, scope_domain, scope_task_type)"
    " VALUES (%s, %s, %s, %s, %s::vector, %s, now(), '', '')"
)
# Of the table's indexes, the two that hold the vectors themselves (migrations 0002, 0005).
VECTOR_INDEXES = ("embedding_hnsw_hashing_256", "embedding_scope_vec_hashing256")


def storage_breakdown(tenant_slug: str, batch: int) -> dict[str, float]:
    """Vectors per second of plain INSERTs of the same rows (as the owner, one transaction
    rolled back): with every index, without the HNSW index, and without both indexes that
    hold vectors (each dropped inside that transaction only). Where the floor goes."""
    import psycopg
    from django.conf import settings
    from psycopg import sql

    from apps.derivations.models import Embedding
    from apps.tenancy.context import tenant_scope
    from apps.tenancy.models import Tenant

    tenant = Tenant.objects.get(slug=tenant_slug)
    with tenant_scope(tenant.pk):
        stored = list(
            Embedding.objects.filter(record__isnull=False).values_list(
                "pk", "record_id", "model", "dimension", "vector", "content_digest"
            )
        )
    owner = settings.DATABASE_OWNER
    rates: dict[str, float] = {}
    for label, dropped in (
        ("every index", ()),
        ("without the HNSW index", VECTOR_INDEXES[:1]),
        ("without both vector indexes", VECTOR_INDEXES),
    ):
        with (
            psycopg.connect(host=owner["HOST"], user=owner["USER"], dbname=owner["NAME"]) as conn,
            conn.transaction(force_rollback=True),
        ):
            conn.execute("SELECT set_config('memoryconsole.tenant_id', %s, true)", [str(tenant.pk)])
            for index in dropped:
                conn.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(index)))
            conn.execute(
                "DELETE FROM derivations_embedding WHERE id = ANY(%s)", [[r[0] for r in stored]]
            )
            elapsed = 0.0
            for start in range(0, len(stored), batch):
                chunk = stored[start : start + batch]
                params = [
                    (tenant.pk, record, model, dimension, str(list(map(float, vector))), digest)
                    for _, record, model, dimension, vector, digest in chunk
                ]
                started = time.perf_counter()
                with conn.cursor() as cursor:
                    cursor.executemany(RAW_INSERT, params)
                elapsed += time.perf_counter() - started
        rates[label] = len(stored) / elapsed
    return rates


def drain(product: Running, token: str, texts: list[str]) -> tuple[int, float]:
    """(embeddings drained, seconds from the worker's resume to the last one done)."""
    import psutil
    from django.db.models import Max

    from apps.tenancy.context import tenant_scope
    from apps.tenancy.models import Tenant
    from apps.work.models import OutboxMessage

    [worker] = [
        c for c in psutil.Process(product.process.pid).children() if "worker" in c.cmdline()
    ]
    os.killpg(worker.pid, signal.SIGSTOP)
    progress(f"writing {len(texts)} records with the worker paused ...")

    def write(n: int) -> None:
        request(
            f"{product.base}/api/v1/records",
            token,
            {
                "key": f"shipping.preference.{n}",
                "subject": f"user:{n}",
                "value": n,
                "content": texts[n],
                "source": {"kind": "interaction", "ref": f"interaction:{n}"},
                # Now: a lifetime counts from observed_at, so a fixed date would expire.
                "observed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "owner": "service:bench",
                "reason": "drain benchmark",
                "scope": {"domain": "commerce"},
                "sensitivity": "internal",
                "retention": {"basis": "contract", "ttl": "P30D"},
            },
        )

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(write, range(len(texts))))
    waiting = request(f"{product.base}/api/v1/health")["work"]["waiting"]
    progress(f"{waiting} embeddings waiting; resuming the worker ...")
    resumed = dt.datetime.now(dt.UTC)
    os.killpg(worker.pid, signal.SIGCONT)
    while True:
        left = request(f"{product.base}/api/v1/health")["work"]["waiting"]
        progress(f"  {left} waiting")
        if left == 0:
            break
        time.sleep(0.5)
    tenant = Tenant.objects.get(slug="bench")
    with tenant_scope(tenant.pk):
        last: Any = OutboxMessage.objects.aggregate(last=Max("finished_at"))["last"]
    return waiting, (last - resumed).total_seconds()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=3000)
    args = parser.parse_args()
    with running_up() as product:
        token = product.tenant_with_token("bench")
        _django(product.home)
        from apps.derivations.embeddings import BATCH_SIZE

        texts = _texts(args.records)
        drained, seconds = drain(product, token, texts)
        progress("measuring the embedder alone ...")
        batched, single = embedder_rates(texts, BATCH_SIZE)
        progress("measuring the storage alone ...")
        storage = storage_rate("bench", BATCH_SIZE)
        progress("measuring plain INSERTs of the vectors, with and without their indexes ...")
        breakdown = storage_breakdown("bench", BATCH_SIZE)
    rate = drained / seconds
    own = max(batched, single)  # the embedder's own rate: its faster way of being called
    ceiling = 1 / (1 / own + 1 / storage)
    print(f"\n{drained} queued embeddings, hashing-256, batches of {BATCH_SIZE}\n")
    print(
        table(
            ["what", "per second", "ratio to the embedder", "ratio to one thread's ceiling"],
            [
                [
                    f"embedder alone ({BATCH_SIZE} texts per call)",
                    f"{batched:,.0f}",
                    batched / own,
                    "",
                ],
                ["embedder alone (one text per call)", f"{single:,.0f}", single / own, ""],
                ["storage alone (bulk INSERT + UPDATE)", f"{storage:,.0f}", storage / own, ""],
                [
                    "one thread's ceiling (embedder, then storage)",
                    f"{ceiling:,.0f}",
                    ceiling / own,
                    "1.00",
                ],
                ["backlog drained by up's worker", f"{rate:,.0f}", rate / own, rate / ceiling],
            ],
        )
    )
    print("\nWhere storing goes: plain INSERTs of the same rows, indexes dropped (rolled back)\n")
    print(
        table(
            ["INSERT", "per second", "ratio to every index"],
            [
                [label, f"{value:,.0f}", value / breakdown["every index"]]
                for label, value in breakdown.items()
            ],
        )
    )
    print(
        f"\nTarget: drain >= 0.8x the embedder: {'PASS' if rate >= 0.8 * own else 'FAIL'}"
        f" ({rate / own:.2f}x; storing the vectors alone allows at most {storage / own:.2f}x)"
    )


if __name__ == "__main__":
    main()
