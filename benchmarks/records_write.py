"""Memory writes: the validated write path beside a raw INSERT of the same rows.

    .venv/bin/python benchmarks/records_write.py [--count 500] [--writers 8]

Prints, from one run on the embedded database: writes/s and single-write p50/p95 through the
service (validation + versioning + observation + audit chain, one transaction per write),
through the HTTP API (gunicorn on loopback, one request per write), and as raw psycopg
INSERTs of the same rows (fact, version, observation, outbox message, audit event and lane
head; one transaction per write, RLS on) and of the fact and version alone; then N concurrent
writers on one tenant. Targets: API p50 < 10 ms; service p50 within 4x of raw; >= 300
writes/s with 8 writers (the per-tenant audit chain must not serialise the tenant below it).
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.harness import (
    ROOT,
    Timing,
    bench_database,
    histogram,
    measure,
    progress,
    setup_django,
    table,
    wait_healthy,
)


def write_body(n: int, prefix: str) -> dict[str, Any]:
    return {
        "key": "shipping.preference",
        "subject": f"user:{prefix}-{n}",
        "value": {"carrier": "carrier_a", "n": n},
        "source": {"kind": "interaction", "ref": f"interaction:{prefix}-{n}", "turn_id": "t1"},
        # Now: a lifetime counts from observed_at, so a fixed date would expire.
        "observed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "owner": "service:checkout",
        "reason": "applied in checkout flow",
        "scope": {"domain": "commerce", "task_type": "checkout", "conditions": {"region": "eu"}},
        "sensitivity": "personal",
        "retention": {"basis": "contract", "ttl": "P30D"},
    }


RAW_FACT = (
    "INSERT INTO records_fact (id, tenant_id, subject, key, scope_id, last_version, created_at) "
    "SELECT %s, %s, %s, %s, id, 1, now() FROM records_scope WHERE tenant_id = %s LIMIT 1"
)
RAW_RECORD = """
INSERT INTO records_memoryrecord (
  id, tenant_id, fact_id, subject, key, version, value, content, source_kind, source_ref,
  source_turn_id, source_tool_call_id, source_run_id, writer_type, writer_id, writer_label,
  observed_at, written_at, owner, reason, scope_domain, scope_task_type, scope_conditions,
  sensitivity, retention_basis, consent_ref, ttl_requested, expires_at, redaction_state,
  redaction_fields, trust, status, current_from, is_current)
VALUES (%s, %s, %s, %s, %s, 1, %s, %s, 'interaction', %s, 't1', '', '', 'credential', %s,
  'bench', %s, now(), %s, %s, %s, %s, %s, 'personal', 'contract', '', interval '30 days',
  now() + interval '30 days', 'none', '{}', 'provisional', 'active', now(), true)
"""


RAW_OBSERVATION = """
INSERT INTO records_observation (tenant_id, id, record_id, source_kind, source_ref,
  source_turn_id, source_tool_call_id, source_run_id, observed_at, recorded_at, writer_type,
  writer_id, writer_label, reason)
VALUES (%s, %s, %s, 'interaction', %s, 't1', '', '', %s, now(), 'credential', %s, 'bench', %s)
"""
RAW_OUTBOX = """
INSERT INTO derivations_outboxmessage (tenant_id, id, task_name, payload, object_id, state,
  attempts, last_error, created_at)
VALUES (%s, %s, 'embed_record', %s, %s, 'pending', 0, '', now())
"""
RAW_HEAD = """
UPDATE audit_auditchainhead
   SET count = count + 1,
       hash = encode(sha256(convert_to(hash || ':' || %s, 'UTF8')), 'hex')
 WHERE tenant_id = %s AND lane = %s
RETURNING hash
"""
RAW_EVENT = """
INSERT INTO audit_auditevent (id, tenant_id, seq, lane, occurred_at, actor_type, actor_id,
  actor_label, action, object_type, object_id, digest, data, prev_hash, hash)
VALUES (%s, %s, nextval('audit_event_seq'), %s, now(), 'credential', %s, 'bench',
  'record.write', 'record', %s, %s, %s, '', %s)
"""


def raw_connection() -> Any:
    import psycopg
    from django.conf import settings

    app = settings.DATABASE_APP
    return psycopg.connect(
        host=app.get("HOST") or None,
        port=app.get("PORT") or None,
        user=app["USER"],
        password=app.get("PASSWORD") or None,
        dbname=os.environ["MEMORYCONSOLE_DATABASE_NAME"],
    )


def insert_fact_and_version(
    conn: Any, tenant_id: uuid.UUID, credential_id: str, body: dict[str, Any]
) -> tuple[uuid.UUID, uuid.UUID]:
    """The fact and version rows of one write, as plain INSERTs in ``conn``'s transaction."""
    fact_id, record_id = uuid.uuid4(), uuid.uuid4()
    value = json.dumps(body["value"])
    # The scope the API writes made first (the raw path is compared after them).
    conn.execute(RAW_FACT, [fact_id, tenant_id, body["subject"], body["key"], tenant_id])
    conn.execute(
        RAW_RECORD,
        [
            record_id,
            tenant_id,
            fact_id,
            body["subject"],
            body["key"],
            value,
            f"{body['key']}: {value}",
            body["source"]["ref"],
            credential_id,
            body["observed_at"],
            body["owner"],
            body["reason"],
            "commerce",
            "checkout",
            json.dumps({"region": "eu"}),
        ],
    )
    return fact_id, record_id


def run_raw(count: int, tenant_id: uuid.UUID, credential_id: str) -> Timing:
    conn = raw_connection()

    def insert(n: int) -> None:
        body = write_body(n, "raw")
        with conn.transaction():
            conn.execute("SELECT set_config('memoryconsole.tenant_id', %s, true)", [str(tenant_id)])
            insert_fact_and_version(conn, tenant_id, credential_id, body)

    try:
        return measure("raw: fact + version", count, insert)
    finally:
        conn.close()


def run_raw_every_row(count: int, tenant_id: uuid.UUID, credential_id: str) -> Timing:
    """Plain INSERTs of every row one service write stores: the fact, the version, its
    observation, the embedding work in the outbox, and the audit event with its lane head."""
    conn = raw_connection()
    lanes = 32
    with conn.transaction():
        conn.execute("SELECT set_config('memoryconsole.tenant_id', %s, true)", [str(tenant_id)])
        for lane in range(lanes):
            conn.execute(
                "INSERT INTO audit_auditchainhead (tenant_id, lane, count, hash)"
                " VALUES (%s, %s, 0, repeat('0', 64)) ON CONFLICT DO NOTHING",
                [tenant_id, lane],
            )

    def insert(n: int) -> None:
        body = write_body(n, "raw-all")
        with conn.transaction():
            conn.execute("SELECT set_config('memoryconsole.tenant_id', %s, true)", [str(tenant_id)])
            fact_id, record_id = insert_fact_and_version(conn, tenant_id, credential_id, body)
            conn.execute(
                RAW_OBSERVATION,
                [
                    tenant_id,
                    uuid.uuid4(),
                    record_id,
                    body["source"]["ref"],
                    body["observed_at"],
                    credential_id,
                    body["reason"],
                ],
            )
            conn.execute(
                RAW_OUTBOX,
                [tenant_id, uuid.uuid4(), json.dumps({"record_id": str(record_id)}), record_id],
            )
            lane = n % lanes
            digest = uuid.uuid4().hex
            row = conn.execute(RAW_HEAD, [digest, tenant_id, lane]).fetchone()
            assert row is not None
            conn.execute(
                RAW_EVENT,
                [
                    uuid.uuid4(),
                    tenant_id,
                    lane,
                    credential_id,
                    str(record_id),
                    digest,
                    json.dumps({"version": 1, "fact": str(fact_id)}),
                    row[0],
                ],
            )

    try:
        return measure("raw: every row", count, insert)
    finally:
        conn.close()


def run_service(count: int, tenant: Any, actor: Any, prefix: str = "svc") -> Timing:
    from apps.records.serializers import write_input
    from apps.records.services import record_write
    from apps.tenancy.context import tenant_scope

    def write(n: int) -> None:
        with tenant_scope(tenant.pk):
            record_write(tenant=tenant, actor=actor, data=write_input(write_body(n, prefix)))

    return measure("service", count, write)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_api(count: int, token: str) -> Timing:
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "memoryconsole.wsgi",
            "-b",
            f"127.0.0.1:{port}",
            "-w",
            "1",
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env={**os.environ, "ALLOWED_HOSTS": "127.0.0.1"},
        start_new_session=True,
    )
    try:
        wait_healthy(port, timeout=30)
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

        def post(n: int) -> None:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            conn.request("POST", "/api/v1/records", json.dumps(write_body(n, "api")), headers)
            response = conn.getresponse()
            response.read()
            if response.status != 201:
                raise RuntimeError(f"API write failed: {response.status}")
            conn.close()

        for n in range(20):  # warm-up: imports, connection, caches
            post(count + 1000 + n)
        return measure("HTTP API", count, post)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(10)


def statements_per_write(tenant: Any, actor: Any, token: str) -> dict[str, int]:
    """SQL statements one new-fact write sends, BEGIN and COMMIT included, per path: the
    round trips that the latency above is made of, independent of the machine's load."""
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    # BEGIN, set_config, the INSERTs (and the lane head's UPDATE), COMMIT: see the raw runs.
    counts = {"raw: fact + version": 5, "raw: every row": 9}
    with CaptureQueriesContext(connection) as service:
        run_service(1, tenant, actor, prefix="count-svc")
    counts["service"] = len(service.captured_queries)
    client = Client(HTTP_HOST="127.0.0.1")
    headers = {"authorization": f"Bearer {token}"}
    with CaptureQueriesContext(connection) as api:
        response = client.post(
            "/api/v1/records", write_body(0, "count-api"), "application/json", headers=headers
        )
    assert response.status_code == 201, response.content[:300]
    counts["HTTP API"] = len(api.captured_queries)
    return counts


def _concurrent_writer(args: tuple[int, int, str, str]) -> list[float]:
    index, count, tenant_id, credential_id = args
    setup_django()
    from apps.core.actors import Actor
    from apps.tenancy.context import tenant_scope
    from apps.tenancy.models import AgentCredential, Tenant

    with tenant_scope(tenant_id):
        tenant = Tenant.objects.get(pk=tenant_id)
        actor = Actor.for_credential(AgentCredential.objects.get(pk=credential_id))
    timing = run_service(count, tenant, actor, prefix=f"w{index}")
    return timing.seconds


def run_concurrent(writers: int, per_writer: int, tenant_id: str, credential_id: str) -> Timing:
    context = multiprocessing.get_context("spawn")
    started = time.perf_counter()
    with context.Pool(writers) as pool:
        results = pool.map(
            _concurrent_writer,
            [(i, per_writer, tenant_id, credential_id) for i in range(writers)],
        )
    wall = time.perf_counter() - started
    # Pool start-up (spawn + django.setup) is outside the writes; subtract its share honestly
    # by measuring throughput over the writers' own busy time instead of the pool's wall.
    busy = max(sum(r) for r in results)
    seconds = [s for r in results for s in r]
    progress(f"{writers} writers: pool wall {wall:.1f}s, slowest writer busy {busy:.1f}s")
    return Timing(f"{writers} concurrent writers", seconds, busy)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=500, help="writes per path")
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--keep", action="store_true", help="keep the benchmark database")
    args = parser.parse_args()

    with bench_database("records", keep=args.keep):
        setup_django()
        from apps.core.actors import Actor
        from apps.tenancy.context import tenant_scope
        from apps.tenancy.services import credential_issue, tenant_create

        tenant = tenant_create(slug="bench", name="Benchmark")
        with tenant_scope(tenant.pk):
            credential, token = credential_issue(
                tenant=tenant, name="bench", actor=Actor.system("benchmark")
            )
        actor = Actor.for_credential(credential)

        progress("warming up")
        run_service(20, tenant, actor, prefix="warm")
        raw = run_raw(args.count, tenant.pk, str(credential.pk))
        raw_all = run_raw_every_row(args.count, tenant.pk, str(credential.pk))
        service = run_service(args.count, tenant, actor)
        api = run_api(args.count, token)
        statements = statements_per_write(tenant, actor, token)
        per_writer = max(1, args.count // 2)
        concurrent = run_concurrent(args.writers, per_writer, str(tenant.pk), str(credential.pk))

    rows = []
    for timing in (raw, raw_all, service, api):
        rows.append(
            [
                timing.label,
                timing.count,
                timing.per_second,
                timing.p50_ms,
                timing.p95_ms,
                f"{timing.p50_ms / raw_all.p50_ms:.1f}x",
                f"{timing.p50_ms / raw.p50_ms:.1f}x",
                statements[timing.label],
            ]
        )
    print("\nSingle writes, one transaction each (embedded PostgreSQL 18, RLS on)\n")
    headers = [
        "path",
        "writes",
        "writes/s",
        "p50 ms",
        "p95 ms",
        "vs every row",
        "vs fact + version",
        "statements",
    ]
    print(table(headers, rows))
    print(
        "\nraw: every row = plain INSERTs of the rows one service write stores (fact, version,"
        "\nobservation, outbox message, audit event and its lane head); raw: fact + version ="
        "\nthe first two only. statements: SQL statements per write, BEGIN and COMMIT included."
    )
    print(f"\n{args.writers} concurrent writers on one tenant (service path, distinct facts)\n")
    print(
        table(
            ["writers", "writes", "writes/s", "p50 ms", "p95 ms"],
            [
                [
                    args.writers,
                    concurrent.count,
                    concurrent.per_second,
                    concurrent.p50_ms,
                    concurrent.p95_ms,
                ]
            ],
        )
    )
    print()
    print(histogram(api))
    checks = [
        ("HTTP API single write p50 < 10 ms", api.p50_ms < 10),
        (
            "service p50 within 4x of a raw INSERT of the same rows",
            service.p50_ms <= 4 * raw_all.p50_ms,
        ),
        (f"{args.writers} writers >= 300 writes/s", concurrent.per_second >= 300),
    ]
    print("\nTargets")
    for label, ok in checks:
        print(f"  [{'PASS' if ok else 'FAIL'}] {label}")


if __name__ == "__main__":
    main()
