"""Server time of the console's memory browser pages at scale.

    .venv/bin/python benchmarks/console_memories.py [--records 100000] [--repeat 30]

Seeds one tenant with ``--records`` live records (varied subjects, keys, domains, trust,
sensitivity and status; every record embedded; some facts with several versions, summaries,
observations), then times each page through Django's request handling in-process (middleware,
tenant context, RLS, template rendering; no network): the first and a deep list page, each
filter, a search, a memory's page, the deletion dry run and a receipt.

Target: every page under 200 ms server time (p95).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.harness import Timing, bench_database, measure, progress, setup_django, table

TARGET_MS = 200


# Facts point at their record before it exists: Django's foreign keys are deferred to commit.
SEED_SQL = [
    # One scope per domain (no task type, no conditions), in the canonical form the write path
    # gives it (apps.records.models.scope_canonical).
    """INSERT INTO records_scope (id, tenant_id, domain, task_type, conditions, canonical,
                                  created_at)
       SELECT md5(%(tenant)s::text || d)::uuid, %(tenant)s, d, '', '{}'::jsonb,
              '["' || d || '","",{}]', now()
         FROM unnest(ARRAY['commerce', 'support', 'billing', 'logistics', 'marketing']) AS d
       ON CONFLICT (tenant_id, canonical) DO NOTHING""",
    """INSERT INTO records_fact (tenant_id, id, subject, key, scope_id, current_id, last_version,
                                 created_at)
       SELECT %(tenant)s, md5('f' || n)::uuid, 'user:' || (n / 10), 'pref.k' || (n %% 10),
              md5(%(tenant)s::text
                  || (ARRAY['commerce', 'support', 'billing', 'logistics', 'marketing'])[n %% 5 + 1]
              )::uuid,
              md5('r' || n)::uuid, 1, now()
         FROM generate_series(0, %(count)s - 1) AS n""",
    """INSERT INTO records_memoryrecord (
           tenant_id, id, fact_id, subject, key, version, value, content, source_kind, source_ref,
           source_turn_id, source_tool_call_id, source_run_id, writer_type, writer_id,
           writer_label, observed_at, written_at, owner, reason, scope_domain, scope_task_type,
           scope_conditions, sensitivity, retention_basis, consent_ref, expires_at,
           redaction_state, redaction_fields, trust, status, current_from, is_current)
       SELECT %(tenant)s, md5('r' || n)::uuid, md5('f' || n)::uuid, 'user:' || (n / 10),
              'pref.k' || (n %% 10), 1,
              jsonb_build_object('choice', 'option ' || (n %% 97), 'n', n),
              'pref.k' || (n %% 10) || ': customer prefers option ' || (n %% 97)
                || ' (note ' || n || ')',
              'interaction', 'interaction:' || n, '', '', '', 'system', '', 'bench',
              now() - make_interval(secs => %(count)s - n),
              now() - make_interval(secs => %(count)s - n),
              'service:checkout', 'bench',
              (ARRAY['commerce', 'support', 'billing', 'logistics', 'marketing'])[n %% 5 + 1], '',
              '{}'::jsonb,
              (ARRAY['public', 'internal', 'personal', 'restricted'])[n %% 4 + 1], 'contract', '',
              now() + interval '30 days', 'none', '{}',
              CASE WHEN n %% 100 = 7 THEN 'confirmed' ELSE 'provisional' END,
              CASE WHEN n %% 100 = 13 THEN 'superseded' ELSE 'active' END,
              now() - make_interval(secs => %(count)s - n), n %% 100 <> 13
         FROM generate_series(0, %(count)s - 1) AS n""",
    """INSERT INTO derivations_embedding (
           tenant_id, record_id, summary_id, model, dimension, vector, content_digest, created_at)
       SELECT %(tenant)s, r.id, NULL, 'hashing-256', 256,
              (SELECT array_agg(random())::real[] FROM generate_series(1, 256 + 0 * r.version))
                ::vector,
              'bench', now()
         FROM records_memoryrecord r""",
]


def seed(tenant: Any, count: int) -> None:
    """``count`` one-version facts, set-based in SQL (as the application role, RLS on):
    1 % confirmed, 1 % superseded, 5 domains, 4 sensitivities, every record embedded."""
    from django.db import connection

    from apps.tenancy.context import tenant_scope

    with tenant_scope(tenant.pk), connection.cursor() as cursor:
        for statement in SEED_SQL:
            cursor.execute(statement, {"tenant": tenant.pk, "count": count})
    progress(f"inserted {count} records")


def rich_fact(tenant: Any) -> tuple[str, str]:
    """A fact with 5 versions, observations, 10 summaries citing it; and one deleted fact.

    Returns (a record id, a receipt id)."""
    from apps.core.actors import Actor
    from apps.derivations.services import summary_create
    from apps.records import purge, services
    from apps.records.serializers import write_input
    from apps.tenancy.context import tenant_scope

    actor = Actor.system("bench")

    def body(value: str, ref: str, subject: str = "user:rich") -> dict[str, Any]:
        return {
            "key": "shipping.preference",
            "subject": subject,
            "value": {"carrier": value, "address": {"city": "Berlin"}},
            "source": {"kind": "interaction", "ref": ref},
            # Now: a lifetime counts from observed_at, so a fixed date would expire.
            "observed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "owner": "user:alice",
            "reason": "bench",
            "scope": {"domain": "commerce"},
            "sensitivity": "personal",
            "retention": {"basis": "contract", "ttl": "P30D"},
        }

    with tenant_scope(tenant.pk):
        record = None
        for n in range(5):
            record = services.record_write(
                tenant=tenant, actor=actor, data=write_input(body(f"c{n}", f"r:{n}"))
            ).record
        assert record is not None
        for n in range(5):
            services.record_write(
                tenant=tenant,
                actor=Actor.system(f"observer-{n}"),
                data=write_input(body("c4", f"o:{n}")),
            )
        for n in range(10):
            summary_create(
                tenant=tenant,
                actor=actor,
                text=f"summary {n}",
                sources=[{"type": "record", "id": str(record.pk)}],
                reason="bench",
            )
        doomed = services.record_write(
            tenant=tenant, actor=actor, data=write_input(body("x", "d:1", "user:doomed"))
        ).record
        deleted = purge.record_delete(record=doomed, actor=actor, reason="bench")
    return str(record.pk), str(deleted.receipt.pk)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--keep", action="store_true", help="keep the benchmark database")
    parser.add_argument("--name", default="console_memories", help="database: bench_<name>")
    parser.add_argument(
        "--reuse", action="store_true", help="time an existing (--keep) database again"
    )
    args = parser.parse_args()

    if args.reuse:
        os.environ["MEMORYCONSOLE_DATABASE_NAME"] = f"bench_{args.name}"
    database = nullcontext() if args.reuse else bench_database(args.name, keep=args.keep)
    with database:
        setup_django()
        from django.conf import settings
        from django.contrib.auth import get_user_model
        from django.test import Client
        from django.urls import reverse

        from apps.core.actors import Actor
        from apps.governance.reclamation import owner_connection
        from apps.records.models import MemoryRecord
        from apps.tenancy.context import tenant_scope
        from apps.tenancy.models import Role, Tenant
        from apps.tenancy.services import membership_set, tenant_create

        settings.OUTBOX_RELAY_ON_COMMIT = False
        tenant = Tenant.objects.filter(slug="bench").first() or tenant_create(
            slug="bench", name="Benchmark"
        )
        user, _ = get_user_model().objects.get_or_create(username="bench")
        membership_set(tenant=tenant, user=user, role=Role.ADMIN, actor=Actor.system("bench"))
        with tenant_scope(tenant.pk):
            seeded = MemoryRecord.objects.exists()
        if not seeded:
            seed(tenant, args.records)
        record_id, receipt_id = rich_fact(tenant)
        progress("analyzing")
        with owner_connection() as owner:
            owner.execute("ANALYZE")

        client = Client(SERVER_NAME="localhost")
        client.force_login(user)
        base = reverse("console:memories", kwargs={"tenant_slug": tenant.slug})

        # A deep page: follow "older" 40 times (2,000 records in).
        deep = base
        for _ in range(40):
            html = client.get(deep).content.decode()
            match = re.search(r'<a href="([^"]+)"[^>]*rel="next"', html)
            assert match, "an older page exists"
            deep = match.group(1).replace("&amp;", "&")

        def page(path: str) -> str:
            return reverse(f"console:{path}", kwargs={"tenant_slug": tenant.slug})

        pages = [
            ("list, first page", base),
            ("list, page 41 (keyset)", deep),
            ("filter subject", f"{base}?subject=user:4242"),
            ("filter key", f"{base}?key=pref.k3"),
            ("filter domain", f"{base}?domain=billing"),
            ("filter trust=confirmed (1 %)", f"{base}?trust=confirmed"),
            ("filter status=superseded (1 %)", f"{base}?status=superseded"),
            ("filter sensitivity", f"{base}?sensitivity=restricted"),
            ("filters combined", f"{base}?domain=billing&sensitivity=public&trust=provisional"),
            ("search", f"{base}?q=option+42"),
            ("search + domain", f"{base}?q=customer+prefers&domain=support"),
            ("memory page", page("memories") + f"{record_id}/"),
            ("delete dry run", page("memories") + f"{record_id}/delete/"),
            ("redact form", page("memories") + f"{record_id}/redact/"),
            (
                "receipt",
                reverse(
                    "console:receipt",
                    kwargs={"tenant_slug": tenant.slug, "receipt_id": receipt_id},
                ),
            ),
        ]
        timings: list[tuple[Timing, str]] = []
        for label, path in pages:
            response = client.get(path)
            assert response.status_code == 200, (label, response.status_code)

            def get(_: int, path: str = path) -> None:
                client.get(path)

            timings.append((measure(label, args.repeat, get), path))

        rows = [
            [
                t.label,
                t.p50_ms,
                t.p95_ms,
                "ok" if t.p95_ms < TARGET_MS else f"OVER {TARGET_MS} ms",
            ]
            for t, _ in timings
        ]
        print(f"\nConsole memory browser, {args.records:,} records, {args.repeat} requests each")
        print(table(["page", "p50 ms", "p95 ms", f"< {TARGET_MS} ms"], rows))


if __name__ == "__main__":
    main()
