"""Deletion with propagation, erasure throughput, and reclamation (issue 4).

    .venv/bin/python benchmarks/derived_delete.py [--count 100] [--erasures 10000,100000]

Prints, from one run on the embedded database:

* delete-with-propagation p50 / p95 (``record_delete``) for a fact with 3 versions cited by
  10 summaries, all embedded, beside a raw cascading DELETE of the same kind of rows (one
  transaction per fact, RLS on);
* erasure throughput (records/s) for each size in ``--erasures`` (the records loaded, then
  vacuumed, before the timing);
* time until erased content is invisible (the erasure's commit) and until it is physically
  reclaimed (``deletions_reclaim``: HNSW rebuild when many embeddings went, then vacuum),
  beside a rebuild of the embeddings table's indexes (``REINDEX TABLE``), both while one
  client searches without pause, and search p95 before, during reclamation and during the
  rebuild (which blocks searches: the reason reclamation does not use it); for reference,
  a concurrent rebuild of the HNSW index alone with reclamation's budget (no parallel
  workers), which is the part of reclamation that takes the time.

``--paths`` times the deletion (``apps.core.deletion``'s one generated statement) through each
cursor it runs on: ``statement`` (prepared, planned once per connection: what the product
runs) and ``unprepared`` (Django's own cursor: planned on every execution), in one run;
``--no-reclaim`` leaves out the reclamation part.

Targets: single delete p95 < 10 ms; erasure >= 5,000 records/s; reclamation no slower than
the index rebuild, with no search p95 regression meanwhile.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.harness import (
    Timing,
    bench_database,
    measure,
    progress,
    setup_django,
    table,
)

RAW_DELETE = [
    "DELETE FROM derivations_embedding WHERE record_id = ANY(%(records)s)"
    " OR summary_id = ANY(%(summaries)s)",
    "UPDATE derivations_summarysource SET fact_id = NULL WHERE fact_id = %(fact)s",
    "DELETE FROM records_observation WHERE record_id = ANY(%(records)s)",
    "DELETE FROM records_conflict WHERE fact_id = %(fact)s",
    "UPDATE records_fact SET current_id = NULL WHERE id = %(fact)s",
    "DELETE FROM records_memoryrecord WHERE fact_id = %(fact)s",
    "DELETE FROM records_fact WHERE id = %(fact)s",
]


# What bulk_records writes to.
BULK_TABLES = ("records_fact", "records_memoryrecord", "derivations_embedding")


def record_body(n: int, prefix: str, version: int) -> dict[str, Any]:
    return {
        "key": "shipping.preference",
        "subject": f"user:{prefix}-{n}",
        "value": {"carrier": f"carrier_{version}", "n": n},
        "content": f"ships with carrier {version} to customer {prefix}-{n}",
        "source": {"kind": "interaction", "ref": f"interaction:{prefix}-{n}-{version}"},
        # Now: a lifetime counts from observed_at, so a fixed date would expire.
        "observed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "owner": "service:checkout",
        "reason": "applied in checkout flow",
        "scope": {"domain": "commerce", "task_type": "checkout"},
        "sensitivity": "personal",
        "retention": {"basis": "contract", "ttl": "P30D"},
    }


def build_facts(tenant: Any, actor: Any, count: int, prefix: str) -> list[dict[str, Any]]:
    """``count`` facts of 3 versions, each cited by 10 summaries, everything embedded."""
    from apps.derivations.embeddings import record_embed, summary_embed
    from apps.derivations.services import summary_create
    from apps.records.serializers import write_input
    from apps.records.services import record_write
    from apps.tenancy.context import tenant_scope
    from apps.work.models import OutboxMessage

    facts = []
    for n in range(count):
        with tenant_scope(tenant.pk):
            versions = [
                record_write(
                    tenant=tenant, actor=actor, data=write_input(record_body(n, prefix, v))
                ).record
                for v in range(3)
            ]
            summaries = [
                summary_create(
                    tenant=tenant,
                    actor=actor,
                    text=f"summary {s} of customer {prefix}-{n}",
                    sources=[{"type": "record", "id": str(versions[s % 3].pk)}],
                    reason="benchmark",
                )
                for s in range(10)
            ]
            for version in versions:
                record_embed(version.pk)
            for summary in summaries:
                summary_embed(summary.pk)
            OutboxMessage.objects.all().delete()
        facts.append(
            {
                "fact": versions[0].fact_id,
                "record": versions[0],
                "records": [v.pk for v in versions],
                "summaries": [s.pk for s in summaries],
            }
        )
        if (n + 1) % max(1, count // 5) == 0:
            progress(f"built {prefix}: {n + 1}/{count} facts")
    return facts


PATHS = ("statement", "unprepared")


def use_path(path: str) -> None:
    """Carry deletions out through ``path`` from now on (record_delete, compaction, erasure)."""
    from apps.core import deletion
    from apps.governance import erasure
    from apps.records import purge as records_purge
    from apps.records.models import Fact, MemoryRecord

    purge: Any
    if path == "unprepared":

        def purge(*, record_ids: Any, fact_ids: Any, reason: str, now: Any) -> Any:
            return deletion.run(
                deleted={MemoryRecord: record_ids, Fact: fact_ids}, now=now, reason=reason
            )

    else:
        purge = PRODUCT_PURGE
    records_purge.versions_purge = purge  # type: ignore[assignment]
    erasure.versions_purge = purge  # type: ignore[assignment]


PRODUCT_PURGE: Any = None


def version_pointers() -> list[tuple[str, str]]:
    """(table, column) of the pointers to versions that a deletion unlinks (``SET_NULL``)."""
    from django.apps import apps
    from django.db import models

    from apps.records.models import MemoryRecord

    return [
        (model._meta.db_table, field.column)
        for model in apps.get_models()
        for field in model._meta.concrete_fields
        if field.is_relation
        and field.related_model is MemoryRecord
        and field.remote_field.on_delete is models.SET_NULL
    ]


def set_pointer_constraints(constrained: bool) -> None:
    """Add or drop the pointers' foreign-key constraints (to time erasure with and without)."""
    from apps.governance.reclamation import owner_connection

    with owner_connection() as owner:
        for table, column in version_pointers():
            name = f"bench_{table}_{column}_fk"
            found = owner.execute(
                "SELECT conname FROM pg_constraint WHERE contype = 'f'"
                " AND conrelid = %s::regclass AND conkey = ARRAY["
                "(SELECT attnum FROM pg_attribute WHERE attrelid = %s::regclass"
                " AND attname = %s)]",
                [table, table, column],
            ).fetchall()
            for (existing,) in found:
                owner.execute(f'ALTER TABLE {table} DROP CONSTRAINT "{existing}"')
            if constrained:
                owner.execute(
                    f'ALTER TABLE {table} ADD CONSTRAINT "{name}" FOREIGN KEY ({column})'
                    " REFERENCES records_memoryrecord (id) DEFERRABLE INITIALLY DEFERRED"
                )


def run_propagating(
    tenant: Any, actor: Any, facts: list[dict[str, Any]], label: str = "record_delete"
) -> Timing:
    from apps.records.purge import record_delete
    from apps.tenancy.context import tenant_scope

    def delete(i: int) -> None:
        with tenant_scope(tenant.pk):
            result = record_delete(record=facts[i]["record"], actor=actor, reason="benchmark")
            assert result.receipt.counts["summaries_invalidated"] == 10

    return measure(f"{label} (propagating)", len(facts), delete)


def run_raw(tenant: Any, facts: list[dict[str, Any]]) -> Timing:
    from django.db import connection

    from apps.tenancy.context import tenant_scope

    def delete(i: int) -> None:
        params = {
            "fact": facts[i]["fact"],
            "records": facts[i]["records"],
            "summaries": facts[i]["summaries"],
        }
        with tenant_scope(tenant.pk), connection.cursor() as cursor:
            for statement in RAW_DELETE:
                cursor.execute(statement, params)

    return measure("raw cascading DELETE", len(facts), delete)


def bulk_records(tenant: Any, count: int, subject: str) -> None:
    """``count`` one-version facts with embeddings, inserted set-based (fast set-up)."""
    from django.utils import timezone

    from apps.derivations.embedders import HashingEmbedder
    from apps.records.models import Fact
    from apps.records.services import scope_for
    from apps.tenancy.context import tenant_scope
    from tests.factories import EmbeddingFactory, FactFactory, MemoryRecordFactory, bulk_save

    embedder = HashingEmbedder(256)
    now = timezone.now()
    for start in range(0, count, 5000):
        size = min(5000, count - start)
        with tenant_scope(tenant.pk):
            scope = scope_for(tenant=tenant, domain="commerce")
            facts = bulk_save(
                [
                    FactFactory.build(
                        tenant=tenant,
                        subject=subject,
                        key=f"k{start + i}",
                        scope=scope,
                        last_version=1,
                    )
                    for i in range(size)
                ]
            )
            records = bulk_save(
                [
                    MemoryRecordFactory.build(
                        tenant=tenant,
                        fact=fact,
                        value=start + i,
                        # The subject too: each erased vector differs from every kept one.
                        content=f"{subject} {fact.key}: value {start + i}",
                        source_ref=f"interaction:{start + i}",
                        writer_label="bench",
                        observed_at=now,
                        owner="service:checkout",
                        reason="bench",
                        retention_basis="contract",
                    )
                    for i, fact in enumerate(facts)
                ]
            )
            Fact.objects.bulk_update(
                [Fact(pk=r.fact_id, current_id=r.pk) for r in records], ["current"]
            )
            vectors = embedder.embed([r.content for r in records])
            bulk_save(
                [
                    EmbeddingFactory.build(
                        tenant=tenant,
                        record=r,
                        model=embedder.name,
                        vector=list(map(float, v)),
                        content_digest="bench",
                        created_at=now,
                    )
                    for r, v in zip(records, vectors, strict=True)
                ]
            )
        progress(f"inserted {start + size}/{count} records for {subject}")


def run_erasure(tenant: Any, actor: Any, count: int) -> tuple[float, int]:
    from apps.governance.erasure import erasure_run

    subject = f"user:erase-{count}-{uuid.uuid4().hex[:6]}"
    bulk_records(tenant, count, subject)
    # Erase from tables in their steady state: freshly inserted rows would otherwise bring
    # autovacuum (its insert threshold) into the timing, and have the erasure set their hint
    # bits.
    owner_seconds(f"VACUUM (ANALYZE) {', '.join(BULK_TABLES)}")
    from apps.tenancy.context import tenant_scope

    started = time.perf_counter()
    with tenant_scope(tenant.pk):
        result = erasure_run(
            tenant=tenant, actor=actor, selector="subject", value=subject, reason="benchmark"
        )
    elapsed = time.perf_counter() - started
    assert result.totals["records"] == count, result.totals
    return elapsed, result.totals["records"]


def search_timing(tenant: Any, actor: Any, count: int, label: str) -> Timing:
    from apps.retrieval.search import search_scoped
    from apps.retrieval.serializers import search_input
    from apps.tenancy.context import tenant_scope

    def search(i: int) -> None:
        with tenant_scope(tenant.pk):
            query = search_input(
                {"query": f"value {i * 7}", "scope": {"domain": "commerce"}}, dimension=256
            )
            search_scoped(tenant=tenant, q=query, actor=actor)

    return measure(label, count, search)


def under_search_load(tenant: Any, actor: Any, job: Any, label: str) -> tuple[float, Timing]:
    """Run ``job`` in a thread while this one searches in rounds of 10 until it ends; return
    the job's seconds and the searches' timings."""
    seconds: list[float] = []

    def run() -> None:
        from django.db import connection

        started = time.perf_counter()
        try:
            job()
        finally:
            connection.close()  # this thread's own connection, before the database drops
        seconds.append(time.perf_counter() - started)

    thread = threading.Thread(target=run)
    thread.start()
    rounds = []
    while thread.is_alive():
        rounds.append(search_timing(tenant, actor, 10, label))
    thread.join()
    timings = [s for t in rounds for s in t.seconds] or [0.0]
    return (seconds[0] if seconds else float("nan")), Timing(label, timings, sum(timings))


def owner_seconds(statement: str, *settings: str) -> float:
    """Seconds ``statement`` takes as the owner, after the ``SET`` statements ``settings``."""
    from apps.governance.reclamation import owner_connection

    with owner_connection() as owner:
        for setting in settings:
            owner.execute(setting)
        started = time.perf_counter()
        owner.execute(statement)
        return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=100, help="facts deleted per path")
    parser.add_argument("--erasures", default="10000,100000", help="erasure sizes")
    parser.add_argument("--keep", action="store_true", help="keep the benchmark database")
    parser.add_argument("--paths", default="statement", help=f"deletion paths: {PATHS}")
    parser.add_argument("--no-reclaim", action="store_true", help="leave reclamation out")
    parser.add_argument(
        "--pointers",
        default="constrained",
        help="erasure with the version pointers' constraints and/or without: constrained,dropped",
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.erasures.split(",") if s]
    paths = [p for p in args.paths.split(",") if p]

    with bench_database("derived", keep=args.keep):
        setup_django()
        from django.conf import settings

        from apps.core.actors import Actor
        from apps.tenancy.services import tenant_create

        settings.OUTBOX_RELAY_ON_COMMIT = False  # no broker needed: everything is inline here
        tenant = tenant_create(slug="bench", name="Benchmark")
        actor = Actor.system("benchmark")

        global PRODUCT_PURGE
        from apps.records import purge as records_purge

        PRODUCT_PURGE = records_purge.versions_purge
        timings = []
        for path in paths:
            use_path(path)
            facts = build_facts(tenant, actor, args.count + 10, f"prop-{path}")
            run_propagating(tenant, actor, facts[:10], path)  # warm-up
            timings.append(run_propagating(tenant, actor, facts[10:], path))
        use_path("statement")
        propagating = timings[0]
        raw_facts = build_facts(tenant, actor, args.count + 10, "raw")
        run_raw(tenant, raw_facts[:10])
        raw = run_raw(tenant, raw_facts[10:])

        erasures = []
        for pointers in [p for p in args.pointers.split(",") if p]:
            set_pointer_constraints(pointers == "constrained")
            for size in sizes:
                for path in paths:
                    use_path(path)
                    elapsed, erased = run_erasure(tenant, actor, size)
                    erasures.append(
                        [f"{path}, pointers {pointers}", size, erased, elapsed, erased / elapsed]
                    )
        set_pointer_constraints(True)
        use_path("statement")
        if args.no_reclaim:
            print_deletes(timings, raw, erasures)
            return

        # Reclamation: a corpus to search, an erasure, then reclamation beside an index rebuild.
        bulk_records(tenant, 20_000, "user:corpus")
        bulk_records(tenant, 20_000, "user:reclaim")
        # As for the erasures: a baseline taken while autovacuum works through the fresh rows
        # (its p95 was 100 ms against a p50 of 31) would excuse any regression after it.
        owner_seconds(f"VACUUM (ANALYZE) {', '.join(BULK_TABLES)}")
        baseline = search_timing(tenant, actor, 100, "search before reclamation")
        invisible_started = time.perf_counter()
        from apps.governance.erasure import erasure_run
        from apps.tenancy.context import tenant_scope

        with tenant_scope(tenant.pk):
            erasure_run(
                tenant=tenant,
                actor=actor,
                selector="subject",
                value="user:reclaim",
                reason="bench",
            )
        invisible = time.perf_counter() - invisible_started

        def reclaim() -> None:
            from apps.governance.reclamation import deletions_reclaim

            deletions_reclaim()

        def rebuild_index() -> None:
            owner_seconds("REINDEX TABLE derivations_embedding")

        def rebuild_hnsw_one_core() -> None:
            from apps.governance.reclamation import RECLAIM_PARALLEL_WORKERS

            owner_seconds(
                "REINDEX INDEX CONCURRENTLY embedding_hnsw_hashing_256",
                f"SET max_parallel_maintenance_workers = {RECLAIM_PARALLEL_WORKERS}",
                f"SET maintenance_work_mem = '{settings.HNSW_BUILD_MEMORY}'",
            )

        # All under the same load: one client searching without pause.
        reclaimed, during = under_search_load(tenant, actor, reclaim, "search during reclamation")
        rebuild, during_rebuild = under_search_load(
            tenant, actor, rebuild_index, "search during REINDEX TABLE"
        )
        rebuild_budget, during_budget = under_search_load(
            tenant, actor, rebuild_hnsw_one_core, "search during the one-core HNSW rebuild"
        )

    print_deletes(timings, raw, erasures)
    print("\nInvisible vs reclaimed (20,000 erased records among 20,000 kept)\n")
    print(
        table(
            ["step (one client searching meanwhile)", "seconds"],
            [
                ["erasure committed (content invisible)", invisible],
                ["reclamation: HNSW rebuild + VACUUM (reclaimed)", reclaimed],
                ["REINDEX TABLE derivations_embedding (parallel workers, blocks search)", rebuild],
                [
                    "for reference: REINDEX INDEX CONCURRENTLY of the HNSW index alone,"
                    " with reclamation's one-core budget",
                    rebuild_budget,
                ],
            ],
        )
    )
    print(
        table(
            ["search", "count", "p50 ms", "p95 ms"],
            [
                [t.label, t.count, t.p50_ms, t.p95_ms]
                for t in (baseline, during, during_rebuild, during_budget)
            ],
        )
    )
    checks = [
        ("single delete p95 < 10 ms", propagating.p95_ms < 10),
        ("erasure >= 5,000 records/s", all(row[4] >= 5000 for row in erasures)),
        ("reclamation no slower than index rebuild", reclaimed <= rebuild),
        (
            "no search p95 regression during reclamation (within 1.5x)",
            during.p95_ms <= 1.5 * baseline.p95_ms,
        ),
    ]
    print("\nTargets")
    for label, ok in checks:
        print(f"  [{'PASS' if ok else 'FAIL'}] {label}")


def print_deletes(timings: list[Timing], raw: Timing, erasures: list[list[Any]]) -> None:
    print("\nDelete one fact (3 versions, 10 citing summaries, 13 embeddings)\n")
    print(
        table(
            ["path", "deletes", "p50 ms", "p95 ms", "p95 vs raw"],
            [
                [t.label, t.count, t.p50_ms, t.p95_ms, f"{t.p95_ms / raw.p95_ms:.1f}x"]
                for t in (*timings, raw)
            ],
        )
    )
    print("\nErasure (set-based, batches of 5,000 facts, a receipt per fact)\n")
    print(table(["path", "records", "erased", "seconds", "records/s"], erasures))


if __name__ == "__main__":
    main()
