"""The console's dashboard and runs page at scale: latency and query count.

    .venv/bin/python benchmarks/console_dashboard.py [--records 100000] [--requests 20]

Set-up (not measured): one tenant with ``--records`` current memory records spread over the
four sensitivity classes, both trust levels and a range of expiry times, 10 % of them with an
open promotion request, 1 % with an open conflict, plus 10,000 obligations (a tenth overdue)
and 2,000 runs with checkpoints; all inserted set-based. Measured: whole-page GETs of the
dashboard (``console:dashboard``) and of the runs page (``console:runs``) through Django's test
client, as a signed-in admin, inside the usual request transaction with row-level security on.
Each page must keep the same number of queries whatever the data size (printed).

Target: both pages well under 500 ms at 100k records on the embedded database.
"""

from __future__ import annotations

import argparse
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.harness import bench_database, measure, progress, setup_django, table

SENSITIVITIES = ("public", "internal", "personal", "restricted")
BATCH = 5000


def seed_records(tenant: Any, count: int) -> None:
    from django.db.models import OuterRef, Subquery
    from django.utils import timezone

    from apps.records.models import Fact, MemoryRecord
    from apps.records.services import scope_for
    from apps.tenancy.context import tenant_scope
    from tests.factories import (
        ConflictFactory,
        FactFactory,
        MemoryRecordFactory,
        PromotionRequestFactory,
        bulk_save,
    )

    now = timezone.now()
    with tenant_scope(tenant.pk):
        scope = scope_for(tenant=tenant, domain="commerce")

    def record(fact: Any, n: int, version: int, current: bool) -> MemoryRecord:
        return MemoryRecordFactory.build(
            tenant=tenant,
            fact=fact,
            version=version,
            value=n,
            content=f"{fact.key}: value {n}",
            source_ref=f"interaction:{n}:{version}",
            writer_label="bench",
            observed_at=now,
            owner="service:checkout",
            reason="bench",
            sensitivity=SENSITIVITIES[n % 4],
            retention_basis="contract",
            trust="confirmed" if n % 3 == 0 else "provisional",
            expires_at=now + timedelta(days=(n % 90) - 5),  # some already expired
            is_current=current,
        )

    for start in range(0, count, BATCH):
        size = min(BATCH, count - start)
        facts = bulk_save(
            [
                FactFactory.build(
                    tenant=tenant,
                    subject=f"user:{(start + i) // 10}",
                    key=f"k{start + i}",
                    scope=scope,
                )
                for i in range(size)
            ]
        )
        records = bulk_save([record(fact, start + i, 1, True) for i, fact in enumerate(facts)])
        with tenant_scope(tenant.pk):
            # One set-based UPDATE (bulk_update's CASE per row is slow at this size).
            Fact.objects.filter(pk__in=[f.pk for f in facts]).update(
                current=Subquery(
                    MemoryRecord.objects.filter(fact=OuterRef("pk"), version=1).values("pk")[:1]
                ),
                last_version=1,
            )
        bulk_save(
            [
                PromotionRequestFactory.build(
                    tenant=tenant, record=r, reason="", requested_by_label="", requested_at=now
                )
                for r in records[::10]
            ]
        )
        contenders = bulk_save(
            [record(r.fact, start + i, 2, False) for i, r in enumerate(records[::100])]
        )
        bulk_save(
            [
                ConflictFactory.build(
                    tenant=tenant, fact=c.fact, current_record=r, contender=c, opened_at=now
                )
                for r, c in zip(records[::100], contenders, strict=True)
            ]
        )
        progress(f"inserted {start + size}/{count} records")


def seed_state(tenant: Any, runs: int, obligations: int) -> None:
    from django.utils import timezone

    from tests.factories import CheckpointFactory, ObligationFactory, RunFactory, bulk_save

    now = timezone.now()
    created = bulk_save(
        [
            RunFactory.build(
                tenant=tenant,
                task_id=f"task-{n % 500}",
                state="open" if n % 4 else "closed",
                opened_at=now - timedelta(minutes=n),
                opened_by_label="",
            )
            for n in range(runs)
        ]
    )
    bulk_save(
        [
            CheckpointFactory.build(
                tenant=tenant, run=run, step=step, state={}, state_digest="x", created_at=now
            )
            for run in created
            for step in range(3)
        ]
    )
    bulk_save(
        [
            ObligationFactory.build(
                tenant=tenant,
                task_id=f"task-{n % 500}",
                key=f"task-{n % 500}:{n}:charge",
                state="pending" if n % 2 else "committed",
                deadline=now + timedelta(hours=(n % 20) - 2),
                payload={},
                created_at=now - timedelta(seconds=n),
                created_by_label="",
            )
            for n in range(obligations)
        ]
    )
    progress(f"inserted {runs} runs and {obligations} obligations")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--keep", action="store_true", help="keep the benchmark database")
    args = parser.parse_args()

    with bench_database("console_dashboard", keep=args.keep):
        setup_django()
        from django.conf import settings
        from django.db import connection
        from django.test import Client
        from django.test.utils import setup_test_environment
        from django.urls import reverse

        from apps.tenancy.models import Role
        from tests.factories import TenantFactory, person

        setup_test_environment()  # the test client's host name
        settings.OUTBOX_RELAY_ON_COMMIT = False
        tenant = TenantFactory(slug="bench", name="Benchmark")
        admin = person(tenant, "bench-admin", Role.ADMIN)
        seed_records(tenant, args.records)
        seed_state(tenant, runs=2_000, obligations=10_000)
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")

        client = Client()
        client.force_login(admin)
        rows = []
        for name in ("dashboard", "runs"):
            url = reverse(f"console:{name}", kwargs={"tenant_slug": tenant.slug})
            assert client.get(url).status_code == 200  # warm-up
            statements: list[str] = []

            def count(execute: Any, sql: str, *rest: Any, seen: list[str] = statements) -> Any:
                seen.append(sql)
                return execute(sql, *rest)

            with connection.execute_wrapper(count):
                client.get(url)
            timing = measure(name, args.requests, lambda _i, url=url: client.get(url))
            rows.append([name, len(statements), timing.p50_ms, timing.p95_ms])

    print(f"\nConsole pages, {args.records:,} records, {args.requests} requests each\n")
    print(table(["page", "queries", "p50 ms", "p95 ms"], rows))


if __name__ == "__main__":
    main()
