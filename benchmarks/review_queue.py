"""The review console at volume: 10,000 pending requests among 100,000 records.

    .venv/bin/python benchmarks/review_queue.py [--records 100000] [--pending 10000]
        [--conflicts 1000] [--repeat 20] [--decisions 100] [--no-browser] [--keep]

Builds (set-based) a tenant with ``--records`` one-version facts, ``--pending`` of them
observed twice with an open promotion request (a colleague holding a claim on one in twenty),
``--conflicts`` open conflicts, canned reasons, and a week of decisions by five reviewers
(bulk approvals, each an audited ``promotion_approve``). Then, in one run:

1. Server time of every console page and action the review work uses, beside a baseline on
   the same data: a bare Django view behind the same sign-in and tenant context that runs
   the page's main query (the same selector call) and answers its ids as plain text. The
   ratio is what the page adds to its query (counts, claims, reasons, templates). Pages are
   timed alternately with their baseline (``--repeat`` each, after a warm-up), through
   Django's test client (URL resolution to rendered response); queries are counted.
2. A scripted session in Chromium (``/usr/bin/chromium``, Playwright) against a server in
   this process: ``--decisions`` approvals from the keyboard in the triage list, counting the
   keys pressed, the requests sent (the new-request poll apart) and the full page loads, and
   timing each decision from its key to the focus on the next request.

Targets (the issue's): one request and one keystroke per decision, no full page load; the
list and a decision within a small multiple of their bare query.
"""

from __future__ import annotations

import argparse
import os
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.harness import Timing, bench_database, progress, setup_django, table

ROOT_URLCONF = "benchmarks.review_queue_urls"
BARE = "bench/review/"
REVIEWERS = 5

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


def bare_urlpatterns() -> list[Any]:
    """The baselines: each runs one console page's main query and nothing else. Behind the
    same ``tenant_view`` (sign-in, membership, tenant context) as the console."""
    from django.http import HttpRequest, HttpResponse
    from django.urls import path

    from apps.core.actors import Actor
    from apps.core.pagination import Cursor
    from apps.records.models import PromotionRequest
    from apps.review.forms import ConflictQueueForm, PromotionQueueFilterForm
    from apps.review.queues import (
        QueueOrder,
        arrivals_mark,
        conflict_queue_page,
        promotion_queue_arrivals,
        promotion_queue_groups,
        promotion_queue_page,
        promotion_queue_selection,
        promotion_queue_sorted_page,
        promotion_request_get,
    )
    from apps.review.services import promotion_approve
    from apps.review.throughput import review_throughput
    from apps.tenancy.permissions import REVIEW_PROMOTIONS
    from apps.tenancy.views import tenant_view

    def ids(items: Any) -> HttpResponse:
        return HttpResponse("\n".join(str(item.pk) for item in items), content_type="text/plain")

    def form(request: HttpRequest) -> PromotionQueueFilterForm:
        filters = PromotionQueueFilterForm(request.GET or None, reviewer_id=str(request.user.pk))
        assert not filters.is_bound or filters.is_valid(), filters.errors
        return filters

    @tenant_view(REVIEW_PROMOTIONS)
    def queue(request: HttpRequest, tenant: Any) -> HttpResponse:
        filters = form(request)
        after = filters.cleaned_data.get("after") if filters.is_bound else None
        if filters.grouping:
            groups = promotion_queue_groups(filters=filters.filters(), by=filters.grouping)
            return HttpResponse("\n".join(g.value for g in groups.groups))
        if filters.order != QueueOrder.OLDEST:
            page = promotion_queue_sorted_page(
                filters=filters.filters(), order=filters.order, after=after
            )
        else:
            page = promotion_queue_page(filters=filters.filters(), after=after)
        return ids(page.items)

    @tenant_view(REVIEW_PROMOTIONS)
    def card(request: HttpRequest, tenant: Any, request_id: Any) -> HttpResponse:
        found = promotion_request_get(request_id)
        return ids([found] if found else [])

    @tenant_view(REVIEW_PROMOTIONS)
    def decide(request: HttpRequest, tenant: Any, request_id: Any) -> HttpResponse:
        found = PromotionRequest.objects.get(pk=request_id)
        promotion_approve(request=found, actor=Actor.for_user(request.user), reason="bench")
        return HttpResponse("ok")

    @tenant_view(REVIEW_PROMOTIONS)
    def arrivals(request: HttpRequest, tenant: Any) -> HttpResponse:
        since = Cursor.parse(request.GET.get("since", "")) or arrivals_mark()
        return HttpResponse(
            str(promotion_queue_arrivals(filters=form(request).filters(), since=since))
        )

    @tenant_view(REVIEW_PROMOTIONS)
    def bulk(request: HttpRequest, tenant: Any) -> HttpResponse:
        return ids(promotion_queue_selection(filters=form(request).filters()))

    @tenant_view(REVIEW_PROMOTIONS)
    def conflicts(request: HttpRequest, tenant: Any) -> HttpResponse:
        queue_form = ConflictQueueForm(request.GET or None)
        assert not queue_form.is_bound or queue_form.is_valid()
        return ids(conflict_queue_page(filters=queue_form.filters(), order=queue_form.order).items)

    @tenant_view(REVIEW_PROMOTIONS)
    def throughput(request: HttpRequest, tenant: Any) -> HttpResponse:
        return HttpResponse("\n".join(row.label for row in review_throughput()))

    prefix = "bench/review/t/<slug:tenant_slug>/"
    return [
        path(prefix + "queue/", queue),
        path(prefix + "card/<uuid:request_id>/", card),
        path(prefix + "decide/<uuid:request_id>/", decide),
        path(prefix + "arrivals/", arrivals),
        path(prefix + "bulk/", bulk),
        path(prefix + "conflicts/", conflicts),
        path(prefix + "throughput/", throughput),
    ]


def add_claims_reasons_and_decisions(tenant: Any, colleague: Any, reviewers: list[Any]) -> None:
    """One pending request in twenty held by a colleague, three canned reasons, and a week of
    decisions: each reviewer approves one bulk batch (audited one by one)."""
    from django.utils import timezone

    from apps.core.actors import Actor
    from apps.records.models import PromotionRequest
    from apps.review.models import ReviewClaim
    from apps.review.queues import (
        BULK_APPROVE_LIMIT,
        PromotionQueueFilters,
        promotion_queue_selection,
        promotions_approve_bulk,
    )
    from apps.review.reasons import review_reason_add
    from apps.tenancy.context import tenant_scope

    with tenant_scope(tenant.pk):
        held = PromotionRequest.objects.order_by("requested_at", "id").values_list("pk", flat=True)
        now = timezone.now()
        ReviewClaim.objects.bulk_create(
            [
                ReviewClaim(
                    tenant=tenant,
                    request_id=pk,
                    holder_id=str(colleague.pk),
                    holder_label=colleague.username,
                    claimed_at=now,
                    expires_at=now + timedelta(hours=8),
                )
                for n, pk in enumerate(held)
                if n % 20 == 7
            ],
            batch_size=5000,
        )
        system = Actor.system("benchmark")
        for decision, text in (
            ("reject", "Duplicate of an existing fact"),
            ("reject", "Test data from staging"),
            ("approve", "Matches the CRM export"),
        ):
            review_reason_add(tenant=tenant, decision=decision, text=text, actor=system)
    for n, reviewer in enumerate(reviewers):
        with tenant_scope(tenant.pk):
            batch = promotion_queue_selection(
                filters=PromotionQueueFilters(claim="available", reviewer_id=str(reviewer.pk)),
                limit=BULK_APPROVE_LIMIT,
            )
            batch = batch[-BULK_APPROVE_LIMIT // 2 :]  # from the newer half: the old stay
            promotions_approve_bulk(
                requests=batch, actor=Actor.for_user(reviewer), reason="benchmark week"
            )
        progress(f"reviewer {n + 1}/{len(reviewers)} decided {len(batch)}")


def timed_pair(
    label: str, repeat: int, console: Any, baseline: Any
) -> tuple[Timing, Timing, int, int]:
    """Time ``console(i)`` and ``baseline(i)`` alternately (after one warm-up each), so drift
    on a busy machine hits both alike; count the queries of one call of each."""
    import time

    from django.db import connection

    def count(call: Any, i: int) -> int:
        statements: list[str] = []

        def note(execute: Any, sql: str, *rest: Any) -> Any:
            statements.append(sql)
            return execute(sql, *rest)

        with connection.execute_wrapper(note):
            call(i)
        return len(statements)

    console_queries = count(console, 0)
    baseline_queries = count(baseline, 0)
    times: dict[str, list[float]] = {"console": [], "baseline": []}
    for i in range(1, repeat + 1):
        for name, call in (("console", console), ("baseline", baseline)):
            started = time.perf_counter()
            call(i)
            times[name].append(time.perf_counter() - started)
    progress(f"{label}: done")
    return (
        Timing(label, times["console"], sum(times["console"])),
        Timing(label, times["baseline"], sum(times["baseline"])),
        console_queries,
        baseline_queries,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--pending", type=int, default=10_000)
    parser.add_argument("--conflicts", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=20, help="timed requests per page")
    parser.add_argument("--decisions", type=int, default=100, help="scripted browser session")
    parser.add_argument("--no-browser", action="store_true", help="skip the browser session")
    parser.add_argument("--keep", action="store_true", help="keep the benchmark database")
    args = parser.parse_args()

    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # Playwright's sync API beside the ORM
    with bench_database("review", keep=args.keep):
        setup_django()
        from django.conf import settings
        from django.contrib.auth import get_user_model
        from django.test import Client
        from django.test.utils import setup_test_environment
        from django.urls import clear_url_caches, reverse

        from apps.core.actors import Actor
        from apps.records.models import PromotionRequest
        from apps.review.queues import COUNT_LIMIT, QUEUE_PAGE_SIZE, arrivals_mark
        from apps.tenancy.context import tenant_scope
        from apps.tenancy.models import Role
        from apps.tenancy.services import membership_set, tenant_create

        setup_test_environment()  # the test client's host is allowed
        settings.ROOT_URLCONF = ROOT_URLCONF
        clear_url_caches()
        settings.OUTBOX_RELAY_ON_COMMIT = False
        tenant = tenant_create(slug="bench", name="Benchmark")
        users = get_user_model().objects
        lead = users.create_user("lead")
        membership_set(tenant=tenant, user=lead, role=Role.ADMIN, actor=Actor.system("b"))
        reviewers = []
        for n in range(REVIEWERS):
            person = users.create_user(f"reviewer-{n}")
            membership_set(tenant=tenant, user=person, role=Role.REVIEWER, actor=Actor.system("b"))
            reviewers.append(person)
        colleague = users.create_user("colleague")
        membership_set(tenant=tenant, user=colleague, role=Role.REVIEWER, actor=Actor.system("b"))
        build(tenant, records=args.records, pending=args.pending, conflicts=args.conflicts)
        add_claims_reasons_and_decisions(tenant, colleague, reviewers)
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")

        reviewer = reviewers[0]
        client = Client()
        client.force_login(reviewer)
        lead_client = Client()
        lead_client.force_login(lead)

        def console(name: str, **kwargs: Any) -> str:
            return reverse(f"console:{name}", kwargs={"tenant_slug": tenant.slug, **kwargs})

        bare = f"/{BARE}t/{tenant.slug}/"
        with tenant_scope(tenant.pk):
            ordered = list(
                PromotionRequest.objects.filter(state="open")
                .order_by("requested_at", "id")
                .values_list("pk", "requested_at")
            )
        middle_pk, middle_at = ordered[len(ordered) // 2]
        cursor_token = f"{middle_at.isoformat()}~{middle_pk}"
        since = arrivals_mark(middle_at).token()
        htmx = {"HX-Request": "true"}
        list_page = {
            "HX-Request": "true",
            "HX-Current-URL": "http://testserver" + console("review"),
        }
        pages: list[tuple[str, str, dict[str, str], str, dict[str, str]]] = [
            ("queue, first page", console("review"), {}, bare + "queue/", {}),
            (
                "queue, deep page (keyset)",
                console("review"),
                {"after": cursor_token},
                bare + "queue/",
                {"after": cursor_token},
            ),
            (
                "queue, key prefix",
                console("review"),
                {"key": "billing."},
                bare + "queue/",
                {"key": "billing."},
            ),
            (
                "queue, subject (1 match)",
                console("review"),
                {"subject": "user:3333"},
                bare + "queue/",
                {"subject": "user:3333"},
            ),
            (
                "queue, domain + sensitivity",
                console("review"),
                {"domain": "support", "sensitivity": "internal"},
                bare + "queue/",
                {"domain": "support", "sensitivity": "internal"},
            ),
            (
                "queue, most sensitive first",
                console("review"),
                {"sort": "sensitivity"},
                bare + "queue/",
                {"sort": "sensitivity"},
            ),
            (
                "queue, not held by others",
                console("review"),
                {"claim": "available"},
                bare + "queue/",
                {"claim": "available"},
            ),
            (
                "queue, grouped by key",
                console("review"),
                {"group": "key"},
                bare + "queue/",
                {"group": "key"},
            ),
            (
                "queue, grouped by subject",
                console("review"),
                {"group": "subject"},
                bare + "queue/",
                {"group": "subject"},
            ),
            (
                "new-request poll",
                console("review-arrivals"),
                {"since": since},
                bare + "arrivals/",
                {"since": since},
            ),
            (
                "bulk confirmation (200)",
                console("review-bulk-approve"),
                {"key": "shipping."},
                bare + "bulk/",
                {"key": "shipping."},
            ),
            ("conflict queue", console("conflicts"), {}, bare + "conflicts/", {}),
            (
                "conflicts, sensitive, filtered",
                console("conflicts"),
                {"sort": "sensitivity", "key": "shipping."},
                bare + "conflicts/",
                {"sort": "sensitivity", "key": "shipping."},
            ),
        ]
        rows: list[list[Any]] = []

        def add_row(label: str, result: tuple[Timing, Timing, int, int]) -> None:
            page, base, page_queries, base_queries = result
            rows.append(
                [
                    label,
                    page.p50_ms,
                    base.p50_ms,
                    page.p50_ms / base.p50_ms,
                    page.p95_ms,
                    page_queries,
                    base_queries,
                ]
            )

        for label, path, query, bare_path, bare_query in pages:
            headers = htmx if "poll" in label else {}

            def page_get(
                _: int,
                path: str = path,
                query: dict[str, str] = query,
                headers: dict[str, str] = headers,
            ) -> None:
                response = client.get(path, query, headers=headers)
                assert response.status_code == 200, (path, response.status_code)

            def bare_get(_: int, path: str = bare_path, query: dict[str, str] = bare_query) -> None:
                response = client.get(path, query)
                assert response.status_code == 200, (path, response.status_code)

            add_row(label, timed_pair(label, args.repeat, page_get, bare_get))

        # The request's own page (the card page a reviewer had before the triage list) and
        # the detail pane's card, beside the bare read of one request.
        sample = [pk for pk, _ in ordered[-(args.repeat + 2) :]]

        def card_get(i: int) -> None:
            assert client.get(console("review-request", request_id=sample[i])).status_code == 200

        def pane_get(i: int) -> None:
            response = client.get(
                console("review-request", request_id=sample[i]), {"view": "list"}, headers=list_page
            )
            assert response.status_code == 200

        def bare_card(i: int) -> None:
            assert client.get(f"{bare}card/{sample[i]}/").status_code == 200

        add_row("the card page (one request)", timed_pair("card", args.repeat, card_get, bare_card))
        add_row("detail pane (htmx card)", timed_pair("pane", args.repeat, pane_get, bare_card))

        # A decision from the list: the console's answer (row gone, count, next card, refill,
        # undo notice) beside the bare approval. Each call decides another open request.
        with tenant_scope(tenant.pk):
            pool = list(
                PromotionRequest.objects.filter(state="open")
                .exclude(claim__holder_id=str(colleague.pk))
                .order_by("requested_at", "id")
                .values_list("pk", flat=True)[: 4 * (args.repeat + 1) + QUEUE_PAGE_SIZE]
            )
        console_pool, bare_pool = pool[0::2], pool[1::2]

        def decide(i: int) -> None:
            shown = console_pool[i : i + QUEUE_PAGE_SIZE]
            response = client.post(
                console("review-approve", request_id=console_pool[i]),
                {
                    "view": "list",
                    "reason": "benchmark",
                    "next": console("review"),
                    "then": str(shown[1]),
                    "last": str(shown[-1]),
                    "shown": [str(pk) for pk in shown],
                },
                headers=list_page,
            )
            assert response.status_code == 200
            assert b'hx-swap-oob="delete"' in response.content

        def bare_decide(i: int) -> None:
            assert client.post(f"{bare}decide/{bare_pool[i]}/").status_code == 200

        add_row(
            "a decision from the list", timed_pair("decision", args.repeat, decide, bare_decide)
        )

        def throughput_get(_: int) -> None:
            assert lead_client.get(console("review-throughput")).status_code == 200

        def bare_throughput_get(_: int) -> None:
            assert lead_client.get(bare + "throughput/").status_code == 200

        add_row(
            "reviewer throughput (lead)",
            timed_pair("throughput", args.repeat, throughput_get, bare_throughput_get),
        )

        print(
            f"\n{args.records} records, {args.pending} pending requests (one in 20 claimed by a "
            f"colleague), {args.conflicts} open conflicts, {REVIEWERS} reviewers' decisions; "
            f"counts stop at {COUNT_LIMIT}. Server side through Django's test client, p50 of "
            f"{args.repeat} alternating calls each.\n"
        )
        print(
            table(
                [
                    "page",
                    "console p50 ms",
                    "bare query p50 ms",
                    "ratio",
                    "console p95 ms",
                    "console queries",
                    "bare queries",
                ],
                rows,
            )
        )
        if not args.no_browser:
            browser_session(tenant, reviewers[1], args.decisions)


def browser_session(tenant: Any, reviewer: Any, decisions: int) -> None:
    """``decisions`` approvals from the keyboard in Chromium against a server in this process:
    keys pressed, requests sent and full page loads per decision, and the time from each key
    to the focus on the next request."""
    import statistics
    import threading
    import time

    from django.conf import settings
    from django.core.servers.basehttp import ThreadedWSGIServer, WSGIRequestHandler
    from django.core.wsgi import get_wsgi_application
    from django.test import Client
    from django.urls import reverse
    from playwright.sync_api import sync_playwright

    class Quiet(WSGIRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadedWSGIServer(("127.0.0.1", 0), Quiet, allow_reuse_address=True)
    server.set_app(get_wsgi_application())
    threading.Thread(target=server.serve_forever, daemon=True).start()
    host, port = server.server_address[:2]
    base = f"http://{host}:{port}"
    settings.ALLOWED_HOSTS = ["*"]
    client = Client()
    client.force_login(reviewer)
    cookie = client.cookies[settings.SESSION_COOKIE_NAME]
    queue = reverse("console:review", kwargs={"tenant_slug": tenant.slug}) + "?claim=available"
    sent: list[str] = []
    loads: list[str] = []
    keys = 0
    latencies: list[float] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path="/usr/bin/chromium", headless=True, args=["--no-sandbox"]
        )
        context = browser.new_context(base_url=base, viewport={"width": 1280, "height": 900})
        context.add_cookies([{"name": cookie.key, "value": cookie.value, "url": base}])
        page = context.new_page()
        page.set_default_timeout(30_000)
        page.on(
            "request",
            lambda r: sent.append(r.url) if r.resource_type in ("xhr", "fetch") else None,
        )
        page.on("framenavigated", lambda f: loads.append(f.url) if f == page.main_frame else None)
        page.goto(queue)
        loads.clear()  # the page the session starts on

        def press(key: str) -> None:
            nonlocal keys
            keys += 1
            page.keyboard.press(key)

        focused = "document.activeElement && document.activeElement.id"
        ready = (
            "(before) => { const a = document.activeElement;"
            " if (!a || !a.id || a.id === before || !a.matches('[data-review-row]')) return false;"
            " return !!document.getElementById(a.id.replace('row-', 'request-')); }"
        )
        press("j")
        page.wait_for_function(f"() => ({focused} || '').startsWith('row-')")
        first_keys = keys
        for n in range(decisions):
            before = page.evaluate(f"() => {focused}")
            started = time.perf_counter()
            press("a")
            if n == 0:  # the first approval asks for its reason; the next ones reuse it
                page.wait_for_function(
                    "() => document.activeElement && document.activeElement.name === 'reason'"
                )
                reason = "verified against the CRM export"
                keys += len(reason)
                page.keyboard.type(reason)
                press("Enter")
            page.wait_for_function(ready, arg=before)
            latencies.append(time.perf_counter() - started)
            if n == 0:
                first_keys = keys - first_keys
                steady_start, steady_sent = keys, len(sent)
        steady_keys = keys - steady_start
        polls = [url for url in sent if "/arrivals/" in url]
        decision_requests = [url for url in sent[steady_sent:] if "/arrivals/" not in url]
        rows_left = page.locator("[data-review-row]").count()
        browser.close()
    server.shutdown()
    later = decisions - 1
    ordered = sorted(latencies[1:])
    print(
        f"\nScripted session: {decisions} approvals by keyboard in Chromium, triage list "
        "filtered to requests no one else holds (one server thread in this process).\n"
    )
    print(
        table(
            ["measure", "value"],
            [
                ["keys for the first decision (j, a, reason, Enter)", first_keys],
                ["keys per decision after the first", steady_keys / later],
                ["requests per decision after the first", len(decision_requests) / later],
                ["full page loads during the session", len(loads)],
                ["new-request polls during the session", len(polls)],
                ["rows in the list at the end", rows_left],
                ["key to next request focused, p50 ms", statistics.median(ordered) * 1000],
                [
                    "key to next request focused, p95 ms",
                    ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))] * 1000,
                ],
            ],
        )
    )


if __name__ == "__main__":
    main()
