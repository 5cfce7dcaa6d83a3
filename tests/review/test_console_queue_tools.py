"""The queues' tools at volume: "N new requests" since the page loaded (added to the list
without reloading it), grouping to decide a group together, the conflict queue's filters,
orders and live count, the lines two versions differ on, and queries that do not grow with
the queue."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.core.actors import Actor
from apps.core.pagination import Cursor
from apps.records.models import Conflict, PromotionRequest
from apps.review.claims import claims_take
from apps.tenancy.context import tenant_scope

from .test_console_review import (
    HTMX,
    WITNESS,
    conflict_on,
    pending,
    queries_for,
    resolve,
    signed_in,
    submitted,
    url,
    write,
)

pytestmark = pytest.mark.django_db

OTHER_WRITER = Actor(type="credential", id="writer-2", label="crm-agent")


def _mark_of(html: str) -> str:
    found = re.search(r'id="review-arrivals"[^>]*hx-get="([^"]+)"', html)
    assert found, "the queue polls for new requests"
    return found.group(1).replace("&amp;", "&")


# --- new requests ---------------------------------------------------------------------------


def test_it_says_how_many_requests_arrived_since_the_page_loaded(client, tenant, reviewer):
    pending(tenant, subject="user:1")
    client = signed_in(client, reviewer)
    poll = _mark_of(client.get(url("review", tenant)).content.decode())
    quiet = client.get(poll, headers=HTMX).content.decode()
    assert "new request" not in quiet
    pending(tenant, subject="user:2")
    pending(tenant, subject="user:3")
    html = client.get(poll, headers=HTMX).content.decode()
    assert "2 new requests since this page loaded" in html
    assert '<span id="review-count" hx-swap-oob="true">3 pending</span>' in html  # live count
    assert "Add them to the list" in html


def test_it_counts_arrivals_under_the_pages_filters(client, tenant, reviewer):
    pending(tenant, subject="user:1", scope={"domain": "alpha"})
    client = signed_in(client, reviewer)
    poll = _mark_of(client.get(url("review", tenant), {"domain": "alpha"}).content.decode())
    pending(tenant, subject="user:2", scope={"domain": "beta"})
    assert "new request" not in client.get(poll, headers=HTMX).content.decode()
    pending(tenant, subject="user:3", scope={"domain": "alpha"})
    assert "1 new request since" in client.get(poll, headers=HTMX).content.decode()


def test_it_adds_the_arrivals_at_the_end_of_the_list_and_moves_the_mark(client, tenant, reviewer):
    pending(tenant, subject="user:1")
    client = signed_in(client, reviewer)
    page = client.get(url("review", tenant)).content.decode()
    rows_url = url("review-arrival-rows", tenant) + "?" + _mark_of(page).split("?", 1)[1]
    arrived = [pending(tenant, subject=f"user:new{n}") for n in range(2)]
    html = client.get(
        rows_url, headers={**HTMX, "HX-Current-URL": "http://testserver" + url("review", tenant)}
    ).content.decode()
    for request in arrived:
        assert f'id="row-{request.pk}"' in html
    assert html.count("tag-new") == 2
    assert re.search(r'id="review-arrivals"[^>]*hx-swap-oob="true"', html)
    moved = _mark_of(html)
    assert "new request" not in client.get(moved, headers=HTMX).content.decode()


@pytest.mark.parametrize("since", ["", "yesterday", "2024-01-01~nope", "x" * 500])
def test_a_damaged_mark_counts_from_now(client, tenant, reviewer, since):
    pending(tenant)
    response = signed_in(client, reviewer).get(
        url("review-arrivals", tenant), {"since": since}, headers=HTMX
    )
    assert response.status_code == 200
    assert "new request" not in response.content.decode()


def test_the_mark_counts_what_came_after_it_exactly(tenant):
    from apps.review.queues import PromotionQueueFilters, promotion_queue_arrivals

    first = pending(tenant, subject="user:1")
    second = pending(tenant, subject="user:2")
    with tenant_scope(tenant.pk):
        filters = PromotionQueueFilters()
        at_first = Cursor(first.requested_at, first.pk)
        assert promotion_queue_arrivals(filters=filters, since=at_first) == 1
        at_second = Cursor(second.requested_at, second.pk)
        assert promotion_queue_arrivals(filters=filters, since=at_second) == 0


# --- grouping -------------------------------------------------------------------------------


def test_it_groups_by_key_and_links_each_group_to_its_own_confirmation(client, tenant, reviewer):
    for n in range(3):
        pending(tenant, subject=f"user:{n}", key="shipping.preference")
    pending(tenant, subject="user:9", key="shipping.preference.note")
    client = signed_in(client, reviewer)
    html = client.get(url("review", tenant), {"group": "key"}).content.decode()
    assert "4 pending</span>, by key" in html
    assert html.index("shipping.preference</span>") < html.index("shipping.preference.note")
    assert "Approve 3…" in html
    assert "Approve 1…" in html
    link = re.search(r'href="([^"]*bulk-approve/\?key_exact=shipping.preference)"', html)
    assert link, html[:3000]
    confirmation = client.get(link.group(1).replace("&amp;", "&")).content.decode()
    assert "Approve 3 requests?" in confirmation
    assert "shipping.preference.note" not in confirmation, "a group is its key exactly"


@pytest.mark.parametrize(
    ("group", "make", "expected"),
    [
        (
            "subject",
            lambda t: [pending(t, subject="user:a", key=k) for k in ("a.x", "a.y")],
            "user:a",
        ),
        ("writer", lambda t: [pending(t, subject=f"user:{n}") for n in range(2)], "checkout-agent"),
        (
            "source",
            lambda t: [pending(t, subject=f"user:{n}", source__kind="tool_call") for n in range(2)],
            "Tool call",
        ),
    ],
)
def test_it_groups_by_subject_writer_or_source(client, tenant, reviewer, group, make, expected):
    make(tenant)
    html = signed_in(client, reviewer).get(url("review", tenant), {"group": group}).content.decode()
    assert expected in html
    assert "Approve 2…" in html


def test_a_group_is_decided_together_through_the_snapshot(client, tenant, reviewer):
    mine = [pending(tenant, subject=f"user:{n}", writer=OTHER_WRITER) for n in range(2)]
    other = pending(tenant, subject="user:9")
    client = signed_in(client, reviewer)
    confirmation_url = url("review-bulk-approve", tenant) + "?decision=reject&writer=crm-agent"
    confirmation = client.get(confirmation_url).content.decode()
    data = submitted(confirmation, url("review-bulk-approve", tenant), reason="staging data")
    client.post(url("review-bulk-approve", tenant), data)
    with tenant_scope(tenant.pk):
        states = dict(PromotionRequest.objects.values_list("pk", "state"))
    assert [states[r.pk] for r in mine] == ["rejected", "rejected"]
    assert states[other.pk] == "open"


def test_a_bad_grouping_is_a_form_error(client, tenant, reviewer):
    pending(tenant)
    html = (
        signed_in(client, reviewer).get(url("review", tenant), {"group": "mood"}).content.decode()
    )
    assert "Check the filters" in html
    assert "Group by" in html


# --- the conflict queue ---------------------------------------------------------------------


def test_the_conflict_queue_filters_by_key_subject_domain_and_sensitivity(client, tenant, reviewer):
    shipping = conflict_on(tenant, subject="user:1", key="shipping.preference")
    billing = conflict_on(tenant, subject="user:2", key="billing.plan", sensitivity="restricted")
    support = conflict_on(tenant, subject="user:3", scope={"domain": "support"})
    client = signed_in(client, reviewer)

    def shown(**query: str) -> set[str]:
        html = client.get(url("conflicts", tenant), query).content.decode()
        return {str(c.pk) for c in (shipping, billing, support) if f'id="conflict-{c.pk}"' in html}

    assert shown(key="shipping.") == {str(shipping.pk), str(support.pk)}
    assert shown(subject="user:2") == {str(billing.pk)}
    assert shown(domain="support") == {str(support.pk)}
    assert shown(sensitivity="restricted") == {str(billing.pk)}
    html = client.get(url("conflicts", tenant), {"sensitivity": "restricted"}).content.decode()
    assert "1 open conflict matching these filters" in html


def test_the_conflict_queue_sorts_most_sensitive_first_and_newest_first(client, tenant, reviewer):
    public = conflict_on(tenant, subject="user:1", sensitivity="public")
    restricted = conflict_on(tenant, subject="user:2", sensitivity="restricted")
    personal = conflict_on(tenant, subject="user:3", sensitivity="personal")
    client = signed_in(client, reviewer)

    def order(sort: str) -> list[str]:
        html = client.get(url("conflicts", tenant), {"sort": sort}).content.decode()
        return [m for m in re.findall(r'<article id="conflict-([0-9a-f-]+)"', html)]

    assert order("") == [str(public.pk), str(restricted.pk), str(personal.pk)]
    assert order("sensitivity") == [str(restricted.pk), str(personal.pk), str(public.pk)]
    assert order("newest") == [str(personal.pk), str(restricted.pk), str(public.pk)]


def test_the_sorted_conflict_queue_pages_forward_by_keyset(client, tenant, reviewer):
    from apps.review.queues import CONFLICT_PAGE_SIZE

    made = [conflict_on(tenant, subject=f"user:{n}") for n in range(CONFLICT_PAGE_SIZE + 2)]
    client = signed_in(client, reviewer)
    first = client.get(url("conflicts", tenant), {"sort": "newest"}).content.decode()
    later = re.search(r'href="([^"]+)"[^>]*rel="next"', first)
    assert later
    second = client.get(later.group(1).replace("&amp;", "&")).content.decode()
    seen = re.findall(r'<article id="conflict-([0-9a-f-]+)"', first + second)
    assert sorted(seen) == sorted(str(c.pk) for c in made)
    assert "Back to the first page" in second


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"sensitivity": "secret"}, "Select a valid choice"),
        ({"age": "forever"}, "Select a valid choice"),
        ({"sort": "random"}, "Select a valid choice"),
        ({"after": "garbage"}, "This page link is damaged"),
    ],
)
def test_a_bad_conflict_filter_is_a_form_error(client, tenant, reviewer, query, message):
    conflict_on(tenant)
    response = signed_in(client, reviewer).get(url("conflicts", tenant), query)
    assert response.status_code == 200
    html = response.content.decode()
    assert "Check the filters" in html
    assert message in html


def test_resolving_answers_with_the_live_count_under_the_filters(client, tenant, reviewer):
    first = conflict_on(tenant, subject="user:1", sensitivity="restricted")
    conflict_on(tenant, subject="user:2", sensitivity="restricted")
    conflict_on(tenant, subject="user:3")
    response = resolve(
        signed_in(client, reviewer),
        tenant,
        first,
        resolution="keep_current",
        reason="the CRM says so",
        headers=HTMX,
        next=url("conflicts", tenant) + "?sensitivity=restricted",
    )
    html = response.content.decode()
    assert (
        '<span id="conflict-count" hx-swap-oob="true">1 open conflict matching these filters'
        in html
    )


def test_the_conflict_shows_the_lines_its_versions_differ_on(client, tenant, reviewer):
    write(tenant, subject="user:1", value="carrier_a")
    outcome = write(tenant, WITNESS, subject="user:1", value="carrier_b", owner="user:bob")
    assert outcome.conflict is not None
    html = signed_in(client, reviewer).get(url("conflicts", tenant)).content.decode()
    assert html.count('<span class="visually-hidden"> (differs)</span>') == 2 * 4
    with tenant_scope(tenant.pk):
        conflict = Conflict.objects.get()
    from apps.review.queues import version_differences

    with tenant_scope(tenant.pk):
        differences = version_differences(conflict.current_record, conflict.contender)
    assert differences == {"value", "source", "writer", "owner"}


def test_the_conflict_queue_offers_the_resolution_keys(client, tenant, reviewer):
    conflict_on(tenant)
    html = signed_in(client, reviewer).get(url("conflicts", tenant)).content.decode()
    assert "data-review-resolutions" in html
    for key in "123":
        assert f'data-resolution-key="{key}"' in html
    assert "keep the current value (then type the reason" in html


# --- bounded queries ------------------------------------------------------------------------


def _busy(tenant, n: int, start: int = 0) -> None:
    colleague = Actor(type="user", id="colleague-1", label="cole")
    made = [pending(tenant, subject=f"user:{start + i}") for i in range(n)]
    with tenant_scope(tenant.pk):
        claims_take(tenant=tenant, request_ids=[r.pk for r in made[::2]], actor=colleague)


@pytest.mark.parametrize(
    "query",
    [
        {},
        {"claim": "available"},
        {"group": "key"},
        {"group": "writer", "sensitivity": "personal"},
        {"sort": "sensitivity"},
        {"writer": "checkout-agent", "source": "interaction"},
    ],
)
def test_the_queue_runs_the_same_queries_however_long_it_is(
    client, tenant, reviewer, django_assert_num_queries, query
):
    _busy(tenant, 2)
    client = signed_in(client, reviewer)
    path = url("review", tenant) + "?" + "&".join(f"{k}={v}" for k, v in query.items())
    few = queries_for(client, path)
    _busy(tenant, 14, start=2)
    with django_assert_num_queries(few):
        assert client.get(path).status_code == 200


def test_the_polls_and_a_claim_run_the_same_queries_however_long_the_queue(
    client, tenant, reviewer, django_assert_num_queries
):
    _busy(tenant, 2)
    client = signed_in(client, reviewer)
    poll = _mark_of(client.get(url("review", tenant)).content.decode())
    rows = url("review-arrival-rows", tenant) + "?" + poll.split("?", 1)[1]
    _busy(tenant, 2, start=2)  # arrivals after the page's mark
    few_poll = queries_for(client, poll)
    few_rows = queries_for(client, rows)
    _busy(tenant, 14, start=4)
    with django_assert_num_queries(few_poll):
        client.get(poll, headers=HTMX)
    with django_assert_num_queries(few_rows):
        client.get(rows, headers=HTMX)


def test_the_conflict_queue_runs_the_same_queries_sorted_and_filtered(
    client, tenant, reviewer, django_assert_num_queries
):
    conflict_on(tenant, subject="user:0")
    client = signed_in(client, reviewer)
    path = url("conflicts", tenant) + "?sort=sensitivity&key=shipping."
    few = queries_for(client, path)
    for n in range(1, 10):
        conflict_on(tenant, subject=f"user:{n}")
    with django_assert_num_queries(few):
        assert client.get(path).status_code == 200


def test_throughput_runs_the_same_queries_for_more_decisions(
    client, tenant, owner, reviewer, django_assert_num_queries
):
    from apps.review.services import promotion_approve

    def decide(n: int, start: int) -> None:
        for i in range(n):
            request = pending(tenant, subject=f"user:{start + i}")
            actor = Actor(type="user", id=f"reviewer-{i % 3}", label=f"reviewer {i % 3}")
            with tenant_scope(tenant.pk):
                promotion_approve(request=request, actor=actor, reason="ok")

    decide(2, 0)
    client = signed_in(client, owner)
    few = queries_for(client, url("review-throughput", tenant))
    decide(9, 2)
    with django_assert_num_queries(few):
        html = client.get(url("review-throughput", tenant)).content.decode()
    assert "reviewer 2" in html


def test_the_queue_hides_requests_older_than_a_claim_only_by_claim_filters(tenant):
    """A claim changes who may decide, never what the queue counts."""
    from apps.review.queues import PromotionQueueFilters, promotion_queue_count

    _busy(tenant, 4)
    with tenant_scope(tenant.pk):
        assert promotion_queue_count(filters=PromotionQueueFilters()) == 4
        mine = PromotionQueueFilters(claim="mine", reviewer_id="colleague-1")
        assert promotion_queue_count(filters=mine) == 2
        later = timezone.now() + timedelta(hours=2)
        from apps.review.models import ReviewClaim

        ReviewClaim.objects.update(expires_at=later - timedelta(hours=3))
        assert promotion_queue_count(filters=mine) == 0


# --- the list never runs dry ------------------------------------------------------------------


def test_a_decision_adds_the_next_request_after_the_lists_last_row(client, tenant, reviewer):
    requests = [pending(tenant, subject=f"user:{n}") for n in range(4)]
    shown = requests[:3]  # the page showed three rows
    response = signed_in(client, reviewer).post(
        url("review-approve", tenant, request_id=shown[0].pk),
        {
            "view": "list",
            "reason": "matches",
            "next": url("review", tenant),
            "last": str(shown[-1].pk),
            "shown": [str(r.pk) for r in shown],
        },
        headers=HTMX,
    )
    html = response.content.decode()
    assert 'hx-swap-oob="beforeend:#review-list"' in html
    assert f'id="row-{requests[3].pk}"' in html
    for request in shown[1:]:
        assert f'id="row-{request.pk}"' not in html.split("beforeend:#review-list")[1]


def test_the_refill_follows_the_pages_order_and_filters(client, tenant, reviewer):
    public = pending(tenant, subject="user:1", sensitivity="public")
    restricted = [pending(tenant, subject=f"user:r{n}", sensitivity="restricted") for n in range(2)]
    personal = pending(tenant, subject="user:2", sensitivity="personal")
    response = signed_in(client, reviewer).post(
        url("review-reject", tenant, request_id=restricted[0].pk),
        {
            "view": "list",
            "reason": "no",
            "next": url("review", tenant) + "?sort=sensitivity",
            "last": str(restricted[1].pk),
            "shown": [str(restricted[0].pk), str(restricted[1].pk)],
        },
        headers=HTMX,
    )
    refill = response.content.decode().split("beforeend:#review-list")[1]
    assert f'id="row-{personal.pk}"' in refill
    assert f'id="row-{public.pk}"' not in refill


@pytest.mark.parametrize("last", ["", "nonsense", "00000000-0000-0000-0000-000000000000", "theirs"])
def test_a_missing_or_foreign_last_row_adds_nothing(client, tenant, other_tenant, reviewer, last):
    first = pending(tenant, subject="user:1")
    pending(tenant, subject="user:2")
    if last == "theirs":  # another tenant's request: invisible here, so no row follows it
        last = str(pending(other_tenant, subject="user:0").pk)
    response = signed_in(client, reviewer).post(
        url("review-approve", tenant, request_id=first.pk),
        {"view": "list", "reason": "ok", "next": url("review", tenant), "last": last},
        headers=HTMX,
    )
    assert response.status_code == 200
    assert "beforeend:#review-list" not in response.content.decode()


def test_a_decision_runs_the_same_queries_however_long_the_queue(client, tenant, reviewer):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def decide(requests: list) -> int:
        first, *rest = requests
        with CaptureQueriesContext(connection) as captured:
            response = client.post(
                url("review-approve", tenant, request_id=first.pk),
                {
                    "view": "list",
                    "reason": "ok",
                    "next": url("review", tenant),
                    "then": str(rest[0].pk),
                    "last": str(rest[1].pk),
                    "shown": [str(r.pk) for r in requests[:3]],
                },
                headers=HTMX,
            )
        assert response.status_code == 200
        assert b"beforeend:#review-list" in response.content
        return len(captured.captured_queries)

    client = signed_in(client, reviewer)
    few = decide([pending(tenant, subject=f"user:{n}") for n in range(4)])
    many = [pending(tenant, subject=f"user:m{n}") for n in range(16)]
    assert decide(many) == few
