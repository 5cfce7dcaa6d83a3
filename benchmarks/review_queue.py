"""The review console at scale: queue pages with 10k pending requests and 100k records.

    .venv/bin/python benchmarks/review_queue.py [--records 100000] [--pending 10000]
        [--conflicts 1000] [--repeat 20]

Builds (set-based, fast) a tenant with ``--records`` one-version facts, ``--pending`` of
them observed twice with an open promotion request, and ``--conflicts`` open conflicts, then
times the console's pages as a signed-in reviewer (Django test client: the whole server side,
from URL resolution through the queries to the rendered template). Prints p50 / p95 per page
and the queries each ran; then one bulk approval (its cap, BULK_APPROVE_LIMIT requests).

Target: every page < 200 ms server time at 10k pending reviews, queries independent of size.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.harness import bench_database, measure, progress, setup_django, table

DOMAINS = ("commerce", "support", "billing", "identity")
SENSITIVITIES = ("public", "internal", "personal", "restricted")
KEYS = ("shipping.preference", "shipping.address", "billing.plan", "contact.email")


def build(tenant: Any, *, records: int, pending: int, conflicts: int) -> None:
    """``records`` current facts; the first ``pending`` with two observations and an open
    request, the next ``conflicts`` with a contradicting second version and an open conflict."""
    from django.utils import timezone

    from apps.records.models import (
        Conflict,
        Fact,
        MemoryRecord,
        Observation,
        PromotionRequest,
    )
    from apps.records.services import scope_for
    from apps.tenancy.context import tenant_scope

    now = timezone.now()
    batch = 5000

    def record(fact: Any, n: int, version: int, value: Any, current: bool) -> MemoryRecord:
        return MemoryRecord(
            tenant=tenant,
            fact=fact,
            subject=fact.subject,
            key=fact.key,
            version=version,
            value=value,
            content=f"{fact.key}: {value}",
            source_kind="interaction",
            source_ref=f"interaction:{n}-{version}",
            writer_type="credential",
            writer_id="writer-1",
            writer_label="checkout-agent",
            observed_at=now - timedelta(days=n % 40),
            written_at=now - timedelta(days=n % 40),
            owner="service:checkout",
            reason="applied in checkout flow",
            scope_domain=DOMAINS[n % len(DOMAINS)],
            scope_task_type="checkout",
            scope_conditions={"region": "eu"},
            sensitivity=SENSITIVITIES[n % len(SENSITIVITIES)],
            retention_basis="indefinite",
            is_current=current,
            current_from=now if current else None,
        )

    for start in range(0, records, batch):
        size = min(batch, records - start)
        with tenant_scope(tenant.pk):
            scopes = {d: scope_for(tenant=tenant, domain=d) for d in DOMAINS}
            facts = Fact.objects.bulk_create(
                [
                    Fact(
                        tenant=tenant,
                        subject=f"user:{start + i}",
                        key=KEYS[(start + i) % len(KEYS)],
                        scope=scopes[DOMAINS[(start + i) % len(DOMAINS)]],
                        last_version=1,
                    )
                    for i in range(size)
                ]
            )
            rows = MemoryRecord.objects.bulk_create(
                [
                    record(fact, start + i, 1, f"value-{start + i}", True)
                    for i, fact in enumerate(facts)
                ]
            )
            Fact.objects.bulk_update(
                [Fact(pk=r.fact_id, current_id=r.pk) for r in rows], ["current"]
            )
            observations = []
            requests = []
            contenders = []
            for i, current in enumerate(rows):
                n = start + i
                observations.append(
                    Observation(
                        tenant=tenant,
                        record=current,
                        source_kind="interaction",
                        source_ref=current.source_ref,
                        observed_at=current.observed_at,
                        recorded_at=current.written_at,
                        writer_type="credential",
                        writer_id="writer-1",
                        writer_label="checkout-agent",
                        reason="applied in checkout flow",
                    )
                )
                if n < pending:
                    observations.append(
                        Observation(
                            tenant=tenant,
                            record=current,
                            source_kind="tool_call",
                            source_ref=f"crm:{n}",
                            observed_at=current.observed_at,
                            recorded_at=current.written_at,
                            writer_type="credential",
                            writer_id="witness-1",
                            writer_label="crm-sync",
                            reason="matched the CRM",
                        )
                    )
                    requests.append(
                        PromotionRequest(
                            tenant=tenant,
                            record=current,
                            evidence={"observations": 2},
                            reason="second independent observation",
                            requested_by_type="credential",
                            requested_by_id="witness-1",
                            requested_by_label="crm-sync",
                            requested_at=now - timedelta(days=n % 40, seconds=n),
                        )
                    )
                elif n < pending + conflicts:
                    contenders.append((current, record(facts[i], n, 2, f"other-{n}", False)))
            Observation.objects.bulk_create(observations)
            PromotionRequest.objects.bulk_create(requests)
            if contenders:
                MemoryRecord.objects.bulk_create([c for _, c in contenders])
                Fact.objects.filter(pk__in=[c.fact_id for _, c in contenders]).update(
                    last_version=2
                )
                Conflict.objects.bulk_create(
                    [
                        Conflict(
                            tenant=tenant,
                            fact_id=current.fact_id,
                            current_record=current,
                            contender=contender,
                            opened_at=now - timedelta(seconds=k),
                        )
                        for k, (current, contender) in enumerate(contenders)
                    ]
                )
        progress(f"built {start + size}/{records} records")
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--pending", type=int, default=10_000)
    parser.add_argument("--conflicts", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=20, help="timed requests per page")
    parser.add_argument("--keep", action="store_true", help="keep the benchmark database")
    args = parser.parse_args()

    with bench_database("review", keep=args.keep):
        setup_django()
        from django.conf import settings
        from django.contrib.auth import get_user_model
        from django.db import connection
        from django.test import Client
        from django.test.utils import setup_test_environment
        from django.urls import reverse

        from apps.audit.services import Actor
        from apps.records.models import PromotionRequest
        from apps.tenancy.context import tenant_scope
        from apps.tenancy.models import Role
        from apps.tenancy.services import membership_set, tenant_create

        setup_test_environment()  # the test client's host is allowed
        settings.OUTBOX_RELAY_ON_COMMIT = False
        tenant = tenant_create(slug="bench", name="Benchmark")
        reviewer = get_user_model().objects.create_user("reviewer")
        membership_set(tenant=tenant, user=reviewer, role=Role.REVIEWER, actor=Actor.system("b"))
        build(tenant, records=args.records, pending=args.pending, conflicts=args.conflicts)

        client = Client()
        client.force_login(reviewer)
        review = reverse("console:review", kwargs={"tenant_slug": tenant.slug})
        conflicts = reverse("console:conflicts", kwargs={"tenant_slug": tenant.slug})
        with tenant_scope(tenant.pk):
            middle = (
                PromotionRequest.objects.filter(state="open")
                .order_by("requested_at", "id")[args.pending // 2 : args.pending // 2 + 1]
                .get()
            )
        cursor = f"{middle.requested_at.isoformat()}~{middle.pk}"
        pages = [
            ("queue, first page", review, {}),
            ("queue, deep page (keyset)", review, {"after": cursor}),
            ("queue, key prefix", review, {"key": "billing."}),
            ("queue, subject (1 match)", review, {"subject": f"user:{args.pending // 3}"}),
            (
                "queue, domain + sensitivity",
                review,
                {"domain": "support", "sensitivity": "internal"},
            ),
            ("queue, pending 30+ days", review, {"age": "30"}),
            ("queue, htmx filter", review, {"key": "shipping.", "hx": True}),
            ("bulk confirmation", review + "bulk-approve/", {"key": "shipping."}),
            ("conflict queue", conflicts, {}),
        ]
        rows = []
        for label, path, query in pages:
            query = dict(query)
            headers = {"HX-Request": "true"} if query.pop("hx", False) else {}

            def get(
                _: int,
                path: str = path,
                query: dict[str, str] = query,
                headers: dict[str, str] = headers,
            ) -> None:
                response = client.get(path, query, headers=headers)
                assert response.status_code == 200, response.status_code

            get(0)  # warm-up
            statements: list[str] = []

            def count(execute: Any, sql: str, *rest: Any, seen: list[str] = statements) -> Any:
                seen.append(sql)
                return execute(sql, *rest)

            with connection.execute_wrapper(count):
                get(0)
            timing = measure(label, args.repeat, get)
            rows.append([label, len(statements), timing.p50_ms, timing.p95_ms])
        print(
            f"\n{args.records} records, {args.pending} pending requests, {args.conflicts} "
            "open conflicts; Django test client, server side only\n"
        )
        print(table(["page", "queries", "p50 ms", "p95 ms"], rows))

        page = client.get(review + "bulk-approve/").content.decode()
        nonce = re.search(r'name="nonce" value="([^"]+)"', page)
        as_of = re.search(r'name="as_of" value="([^"]+)"', page)
        assert nonce
        assert as_of
        started = time.perf_counter()
        response = client.post(
            review + "bulk-approve/",
            {"nonce": nonce.group(1), "as_of": as_of.group(1), "reason": "benchmark"},
        )
        elapsed = time.perf_counter() - started
        assert response.status_code == 302, response.status_code
        with tenant_scope(tenant.pk):
            approved = PromotionRequest.objects.filter(state="approved").count()
        print(
            f"\nbulk approval: {approved} approved in {elapsed:.2f} s "
            f"({elapsed / max(1, approved) * 1000:.1f} ms per request, one transaction)"
        )


if __name__ == "__main__":
    main()
