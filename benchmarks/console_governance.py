"""The console's erasure and deletion pages at scale (100k records).

    .venv/bin/python benchmarks/console_governance.py [--records 100000]

On a throw-away database: writes ``--records`` one-version facts of one subject, then, as an
admin in the console (Django's test client, the real views and templates):

* the erasure confirmation (counting what would go), p50 over 5 requests;
* the erasure itself, queued through the outbox and run by the task as the worker would,
  while another thread polls the job page every second (states seen, page p50);
* the deletion history and the erasure's per-fact receipts (100k of them) page p50,
  and verify-erasure on the erasure's summary receipt.

Indicative only on a shared machine; the erasure's own speed is ``derived_delete.py``'s.
"""

from __future__ import annotations

import argparse
import re
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.harness import Timing, bench_database, measure, progress, setup_django, table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--keep", action="store_true", help="keep the benchmark database")
    args = parser.parse_args()

    with bench_database("governance", keep=args.keep):
        setup_django()
        from django.conf import settings
        from django.contrib.auth import get_user_model
        from django.test import Client
        from django.test.utils import setup_test_environment
        from django.urls import reverse

        from apps.core.actors import Actor
        from apps.derivations import tasks as _tasks  # noqa: F401 - registers the tasks
        from apps.governance import tasks as _governance_tasks  # noqa: F401 - and erasure jobs
        from apps.tenancy.models import Role
        from apps.tenancy.services import membership_set, tenant_create
        from apps.work.outbox import outbox_relay
        from benchmarks.derived_delete import bulk_records
        from memoryconsole.celery import TENANT_HEADER, app

        setup_test_environment()
        settings.OUTBOX_RELAY_ON_COMMIT = False  # no broker: the task runs here, as a worker
        tenant = tenant_create(slug="bench", name="Benchmark")
        user = get_user_model().objects.create_user(username="admin")
        membership_set(tenant=tenant, user=user, role=Role.ADMIN, actor=Actor.system("bench"))
        bulk_records(tenant, args.records, "user:big")

        client = Client()
        client.force_login(user)

        def url(name: str, **kwargs: Any) -> str:
            return reverse(f"console:{name}", kwargs={"tenant_slug": tenant.slug, **kwargs})

        form = {"selector": "subject", "value": "user:big", "reason": "benchmark"}
        confirm = measure("erasure confirmation", 5, lambda _i: client.post(url("erasures"), form))
        html = client.post(url("erasures"), form).content.decode()
        nonce = re.search(r'name="nonce" value="([^"]+)"', html)
        records = re.search(r'name="records" value="(\d+)"', html)
        assert nonce, "no confirmation"
        assert records, "no confirmation"
        started = client.post(
            url("erasure-start"),
            {**form, "nonce": nonce.group(1), "records": records.group(1)},
        )
        job_url = started["Location"]

        states: list[str] = []
        poll_seconds: list[float] = []
        done = threading.Event()

        def poll() -> None:
            poller = Client()
            poller.force_login(user)
            while not done.is_set():
                t0 = time.perf_counter()
                page = poller.get(job_url, headers={"HX-Request": "true"}).content.decode()
                poll_seconds.append(time.perf_counter() - t0)
                state = re.search(r'class="status status-\w+">(\w+)<', page)
                states.append(state.group(1) if state else "?")
                done.wait(1.0)

        published: list[Any] = []

        poller = threading.Thread(target=poll)
        poller.start()
        t0 = time.perf_counter()
        # Published by the relay, then run outside its transaction, as a worker runs it.
        outbox_relay(limit=10, publish=published.append)
        for message in published:
            app.tasks[message.task_name].apply(
                kwargs={**message.payload, "outbox_id": str(message.pk)},
                headers={TENANT_HEADER: str(message.tenant_id)},
            )
        erasure_seconds = time.perf_counter() - t0
        time.sleep(1.5)
        done.set()
        poller.join()
        final = client.get(job_url).content.decode()
        assert "Erased." in final, "the erasure did not finish"
        receipt_id = re.search(r"Summary receipt <code>([0-9a-f-]{36})</code>", final)
        assert receipt_id
        seen = [s for i, s in enumerate(states) if i == 0 or states[i - 1] != s]
        progress(f"job states seen while polling: {' -> '.join(seen)}")

        verified: list[bytes] = []
        history = measure("deletion history", 10, lambda _i: client.get(url("deletions")))
        children = measure(
            "100k per-fact receipts, first page",
            10,
            lambda _i: client.get(url("deletions"), {"parent": receipt_id.group(1)}),
        )
        verify = measure(
            "verify erasure (100k)",
            1,
            lambda _i: verified.append(
                client.get(url("deletion-verify", receipt_id=receipt_id.group(1))).content
            ),
        )
        outcome = (
            b"Passed."
            if b"Passed." in verified[0]
            else b"Not verified."
            if (b"Not verified." in verified[0])
            else b"Failed"
        )
        polls = Timing("job page while erasing", poll_seconds, sum(poll_seconds))

        print(f"\nConsole erasure of {args.records} records (indicative):\n")
        print(
            table(
                ["measure", "count", "p50 ms", "p95 ms"],
                [
                    [t.label, t.count, t.p50_ms, t.p95_ms]
                    for t in (confirm, polls, history, children, verify)
                ],
            )
        )
        print(f"\nqueued erasure run by the task: {erasure_seconds:.1f} s")
        print(f"job states seen by the page: {' -> '.join(seen)}")
        print(f"verify erasure said: {outcome.decode()}")


if __name__ == "__main__":
    main()
