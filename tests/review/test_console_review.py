"""The review console: the promotion queue (approve, reject, bulk approve) and the conflict
queue (keep current, accept new, corrected), with permissions and bounded queries."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta
from html.parser import HTMLParser
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from apps.audit.models import AuditEvent
from apps.core.actors import Actor
from apps.records.models import (
    Conflict,
    Fact,
    MemoryRecord,
    PromotionEvent,
    PromotionRequest,
)
from apps.records.serializers import write_input
from apps.records.services import WriteOutcome, record_write
from apps.tenancy.context import tenant_scope
from apps.tenancy.models import Tenant
from tests.records.factories import body

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}
WRITER = Actor(type="credential", id="writer-1", label="checkout-agent")
WITNESS = Actor(type="credential", id="witness-1", label="crm-sync")


def url(name: str, tenant: Tenant, **kwargs: Any) -> str:
    return reverse(f"console:{name}", kwargs={"tenant_slug": tenant.slug, **kwargs})


def signed_in(client: Client, user: Any) -> Client:
    client.force_login(user)
    return client


def write(tenant: Tenant, actor: Actor = WRITER, **overrides: Any) -> WriteOutcome:
    data = body(**{"source__ref": f"interaction:{uuid.uuid4()}", **overrides})
    with tenant_scope(tenant.pk):
        return record_write(tenant=tenant, actor=actor, data=write_input(data))


def pending(
    tenant: Tenant, subject: str = "user:8812", writer: Actor = WRITER, **overrides: Any
) -> PromotionRequest:
    """A provisional record observed again by an independent source: an open request."""
    write(tenant, writer, subject=subject, **overrides)
    outcome = write(tenant, WITNESS, subject=subject, **overrides)
    assert outcome.promotion_request is not None
    return outcome.promotion_request


def conflict_on(tenant: Tenant, subject: str = "user:8812", **overrides: Any) -> Conflict:
    write(tenant, subject=subject, value="carrier_a", **overrides)
    outcome = write(tenant, subject=subject, value="carrier_b", **overrides)
    assert outcome.conflict is not None
    return outcome.conflict


def request_state(tenant: Tenant, request: PromotionRequest) -> tuple[str, str]:
    with tenant_scope(tenant.pk):
        found = PromotionRequest.objects.select_related("record").get(pk=request.pk)
        return found.state, found.record.trust


def conflict_row(tenant: Tenant, conflict: Conflict) -> Conflict:
    with tenant_scope(tenant.pk):
        return Conflict.objects.get(pk=conflict.pk)


def current_value(tenant: Tenant, conflict: Conflict) -> Any:
    with tenant_scope(tenant.pk):
        fact = Fact.objects.select_related("current").get(pk=conflict.fact_id)
        assert fact.current is not None
        return fact.current.value


def versions_of(tenant: Tenant, conflict: Conflict) -> int:
    with tenant_scope(tenant.pk):
        return MemoryRecord.objects.filter(fact_id=conflict.fact_id).count()


def events(tenant: Tenant, action: str) -> list[AuditEvent]:
    with tenant_scope(tenant.pk):
        return list(AuditEvent.objects.filter(action=action))


def nonce_of(html: str) -> str:
    match = re.search(r'name="nonce" value="([^"]+)"', html)
    assert match, "the confirmation form carries a nonce"
    return match.group(1)


def hidden(html: str, name: str) -> str:
    match = re.search(rf'name="{name}" value="([^"]*)"', html)
    assert match, f"the form carries {name}"
    return match.group(1).replace("&#x27;", "'").replace("&quot;", '"').replace("&amp;", "&")


class _FormInputs(HTMLParser):
    """The inputs of the page's form that posts to ``action``, as a browser would send them."""

    def __init__(self, action: str) -> None:
        super().__init__()
        self.action = action
        self.inside = False
        self.data: dict[str, list[str]] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "form":
            self.inside = found.get("action") == self.action
            return
        sent = found.get("type") in {"hidden", "text", None} and bool(found.get("name"))
        if tag == "input" and self.inside and sent:
            self.data.setdefault(str(found["name"]), []).append(found.get("value") or "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self.inside = False


def submitted(html: str, action: str, **typed: str) -> dict[str, list[str]]:
    """What submitting the form at ``action`` on ``html`` sends, with ``typed`` filled in."""
    parser = _FormInputs(action)
    parser.feed(html)
    assert parser.data, f"the page has a form posting to {action}"
    return {**parser.data, **{name: [value] for name, value in typed.items()}}


# --- access -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["review", "conflicts", "review-bulk-approve"])
def test_it_redirects_anonymous_people_to_the_login_page(client, tenant, name):
    response = client.get(url(name, tenant))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("console:login"))


@pytest.mark.parametrize("persona", ["member", "auditor"])
@pytest.mark.parametrize("name", ["review", "conflicts", "review-bulk-approve"])
def test_it_forbids_the_queues_to_people_who_cannot_review(client, tenant, request, persona, name):
    user = request.getfixturevalue(persona)
    assert signed_in(client, user).get(url(name, tenant)).status_code == 403


@pytest.mark.parametrize("persona", ["member", "auditor"])
def test_it_forbids_decisions_to_people_who_cannot_review(client, tenant, request, persona):
    promotion = pending(tenant)
    conflict = conflict_on(tenant, subject="user:2")
    client = signed_in(client, request.getfixturevalue(persona))
    approve = client.post(url("review-approve", tenant, request_id=promotion.pk), {"reason": "x"})
    reject = client.post(url("review-reject", tenant, request_id=promotion.pk), {"reason": "x"})
    resolve = client.post(
        url("conflict-resolve", tenant, conflict_id=conflict.pk),
        {"resolution": "accept_new", "reason": "x"},
    )
    assert (approve.status_code, reject.status_code, resolve.status_code) == (403, 403, 403)
    assert request_state(tenant, promotion) == ("open", "provisional")
    assert conflict_row(tenant, conflict).state == "open"


def test_it_hides_another_tenants_queues_behind_a_404(client, tenant, other_tenant, reviewer):
    client = signed_in(client, reviewer)
    assert client.get(url("review", other_tenant)).status_code == 404
    assert client.get(url("conflicts", other_tenant)).status_code == 404


def test_it_answers_404_for_another_tenants_request_and_conflict_ids(
    client, tenant, other_tenant, reviewer
):
    theirs = pending(other_tenant)
    their_conflict = conflict_on(other_tenant)
    client = signed_in(client, reviewer)
    responses = [
        client.get(url("review-request", tenant, request_id=theirs.pk)),
        client.post(url("review-approve", tenant, request_id=theirs.pk), {"reason": "x"}),
        client.post(url("review-reject", tenant, request_id=theirs.pk), {"reason": "x"}),
        client.get(url("conflict", tenant, conflict_id=their_conflict.pk)),
        client.post(
            url("conflict-resolve", tenant, conflict_id=their_conflict.pk),
            {"resolution": "accept_new", "reason": "x"},
        ),
    ]
    assert [r.status_code for r in responses] == [404] * 5
    assert request_state(other_tenant, theirs) == ("open", "provisional")
    assert conflict_row(other_tenant, their_conflict).state == "open"


def test_it_links_both_queues_in_the_navigation_of_a_reviewer(client, tenant, reviewer):
    html = signed_in(client, reviewer).get(url("review", tenant)).content.decode()
    assert f'href="{url("review", tenant)}" aria-current="page"' in html
    assert f'href="{url("conflicts", tenant)}"' in html


# --- the promotion queue ------------------------------------------------------------------------


def test_it_shows_a_request_with_its_record_and_observations(client, tenant, reviewer):
    pending(tenant, owner="user:alice", reason="applied in checkout flow")
    response = signed_in(client, reviewer).get(url("review", tenant))
    html = response.content.decode()
    assert response.status_code == 200
    assert "1 pending" in html
    assert "user:8812" in html
    assert "shipping.preference" in html
    assert "&quot;carrier_a&quot;" in html  # the value as JSON
    for shown in ("checkout-agent", "crm-sync", "user:alice", "applied in checkout flow"):
        assert shown in html
    assert "commerce" in html
    assert "checkout" in html
    assert "region=&quot;eu&quot;" in html
    assert "2 observations" in html
    assert "<kbd>j</kbd>" in html
    assert "<kbd>a</kbd>" in html


def test_it_says_what_to_do_when_nothing_is_pending(client, tenant, reviewer):
    html = signed_in(client, reviewer).get(url("review", tenant)).content.decode()
    assert "Nothing to review" in html


def test_it_returns_only_the_results_to_an_htmx_filter(client, tenant, reviewer):
    pending(tenant)
    response = signed_in(client, reviewer).get(url("review", tenant), headers=HTMX)
    html = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in html
    assert 'id="review-results"' in html


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"key": "shipping."}, {"user:1", "user:2"}),
        ({"key": "billing"}, {"user:3"}),
        ({"subject": "user:2"}, {"user:2"}),
        ({"domain": "support"}, {"user:2"}),
        ({"sensitivity": "restricted"}, {"user:3"}),
    ],
)
def test_it_filters_the_queue(client, tenant, reviewer, query, expected):
    pending(tenant, subject="user:1")
    pending(tenant, subject="user:2", scope={"domain": "support"})
    pending(tenant, subject="user:3", key="billing.plan", sensitivity="restricted")
    html = signed_in(client, reviewer).get(url("review", tenant), query).content.decode()
    shown = {subject for subject in ("user:1", "user:2", "user:3") if f">{subject}<" in html}
    assert shown == expected


def test_it_filters_the_queue_by_how_long_requests_have_waited(client, tenant, reviewer):
    old = pending(tenant, subject="user:old")
    pending(tenant, subject="user:new")
    with tenant_scope(tenant.pk):
        PromotionRequest.objects.filter(pk=old.pk).update(
            requested_at=timezone.now() - timedelta(days=8)
        )
    html = signed_in(client, reviewer).get(url("review", tenant), {"age": "7"}).content.decode()
    assert ">user:old<" in html
    assert ">user:new<" not in html


def test_it_pages_the_queue_oldest_first(client, tenant, reviewer, monkeypatch):
    monkeypatch.setattr("apps.review.views.decisions.QUEUE_PAGE_SIZE", 2)
    for n in range(3):
        pending(tenant, subject=f"user:{n}")
    client = signed_in(client, reviewer)
    first = client.get(url("review", tenant)).content.decode()
    assert ">user:0<" in first
    assert ">user:1<" in first
    assert ">user:2<" not in first
    later = re.search(r'href="([^"]+)"[^>]*rel="next"', first)
    assert later
    second = client.get(later.group(1).replace("&amp;", "&")).content.decode()
    assert ">user:2<" in second
    assert ">user:0<" not in second
    assert 'rel="prev"' in second


def test_it_explains_a_tampered_page_link(client, tenant, reviewer):
    response = signed_in(client, reviewer).get(url("review", tenant), {"after": "nonsense"})
    assert response.status_code == 200
    assert "page link is damaged" in response.content.decode()


def test_it_shows_one_request_on_its_own_page(client, tenant, reviewer):
    promotion = pending(tenant)
    response = signed_in(client, reviewer).get(
        url("review-request", tenant, request_id=promotion.pk)
    )
    assert response.status_code == 200
    assert "crm-sync" in response.content.decode()


# --- approve and reject -------------------------------------------------------------------------


def test_it_approves_without_javascript_and_returns_to_the_filtered_queue(client, tenant, reviewer):
    promotion = pending(tenant)
    back = url("review", tenant) + "?key=shipping."
    response = signed_in(client, reviewer).post(
        url("review-approve", tenant, request_id=promotion.pk), {"reason": "checked", "next": back}
    )
    assert response.status_code == 302
    assert response["Location"] == back
    assert request_state(tenant, promotion) == ("approved", "confirmed")
    [event] = events(tenant, "promotion.approve")
    assert (event.actor_type, event.actor_id) == ("user", str(reviewer.pk))


def test_it_ignores_an_off_site_next(client, tenant, reviewer):
    promotion = pending(tenant)
    response = signed_in(client, reviewer).post(
        url("review-approve", tenant, request_id=promotion.pk),
        {"reason": "checked", "next": "https://evil.test/"},
    )
    assert response["Location"] == url("review", tenant)


def test_it_approves_in_place_for_htmx(client, tenant, reviewer):
    promotion = pending(tenant)
    response = signed_in(client, reviewer).post(
        url("review-approve", tenant, request_id=promotion.pk), {"reason": "seen"}, headers=HTMX
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in html
    assert html.lstrip().startswith(f'<article id="request-{promotion.pk}"')
    assert "Approved</span>" in html
    assert 'hx-swap-oob="innerHTML"' in html
    assert "the record is confirmed" in html
    assert request_state(tenant, promotion) == ("approved", "confirmed")


def test_it_rejects_with_a_reason(client, tenant, reviewer):
    promotion = pending(tenant)
    response = signed_in(client, reviewer).post(
        url("review-reject", tenant, request_id=promotion.pk),
        {"reason": "the CRM disagrees"},
        headers=HTMX,
    )
    assert "Rejected</span>" in response.content.decode()
    assert request_state(tenant, promotion) == ("rejected", "provisional")
    with tenant_scope(tenant.pk):
        assert PromotionRequest.objects.get(pk=promotion.pk).decision_reason == "the CRM disagrees"


@pytest.mark.parametrize("headers", [{}, HTMX])
def test_it_requires_a_reason_to_approve(client, tenant, reviewer, headers):
    promotion = pending(tenant)
    response = signed_in(client, reviewer).post(
        url("review-approve", tenant, request_id=promotion.pk), {"reason": "  "}, headers=headers
    )
    html = response.content.decode()
    assert response.status_code == (200 if headers else 400)
    assert "Say why you approve it" in html
    assert 'aria-invalid="true"' in html
    assert request_state(tenant, promotion) == ("open", "provisional")
    assert events(tenant, "promotion.approve") == []


@pytest.mark.parametrize("headers", [{}, HTMX])
def test_it_requires_a_reason_to_reject(client, tenant, reviewer, headers):
    promotion = pending(tenant)
    response = signed_in(client, reviewer).post(
        url("review-reject", tenant, request_id=promotion.pk), {"reason": "  "}, headers=headers
    )
    html = response.content.decode()
    assert response.status_code == (200 if headers else 400)
    assert "Say why you reject it" in html
    assert 'aria-invalid="true"' in html
    assert request_state(tenant, promotion) == ("open", "provisional")
    assert events(tenant, "promotion.reject") == []


def test_it_makes_a_double_approval_harmless(client, tenant, reviewer):
    promotion = pending(tenant)
    client = signed_in(client, reviewer)
    target = url("review-approve", tenant, request_id=promotion.pk)
    client.post(target, {"reason": "ok"}, headers=HTMX)
    again = client.post(target, {"reason": "ok"}, headers=HTMX)
    html = again.content.decode()
    assert again.status_code == 200
    assert "already approved" in html
    assert "Approved</span>" in html
    assert len(events(tenant, "promotion.approve")) == 1
    with tenant_scope(tenant.pk):
        assert PromotionEvent.objects.filter(record_id=promotion.record_id).count() == 1


def test_it_refuses_to_let_a_reviewer_approve_a_record_they_wrote(client, tenant, reviewer):
    promotion = pending(tenant, writer=Actor.for_user(reviewer))
    client = signed_in(client, reviewer)
    page = client.get(url("review", tenant)).content.decode()
    assert "You wrote this record" in page
    response = client.post(
        url("review-approve", tenant, request_id=promotion.pk), {"reason": "mine"}, headers=HTMX
    )
    assert "cannot promote its own record" in response.content.decode()
    assert request_state(tenant, promotion) == ("open", "provisional")


# --- bulk approval ------------------------------------------------------------------------------


def test_it_confirms_a_bulk_approval_with_the_count(client, tenant, reviewer):
    pending(tenant, subject="user:1")
    pending(tenant, subject="user:2")
    pending(tenant, subject="user:3", key="billing.plan")
    response = signed_in(client, reviewer).get(
        url("review-bulk-approve", tenant), {"key": "shipping."}
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert "Approve 2 requests?" in html
    assert "shipping." in html
    with tenant_scope(tenant.pk):
        assert PromotionRequest.objects.filter(state="open").count() == 3


def bulk_confirm(client: Client, tenant: Tenant, **filters: str) -> str:
    response = client.get(url("review-bulk-approve", tenant), filters)
    assert response.status_code == 200
    return response.content.decode()


def bulk_submit(client: Client, tenant: Tenant, page: str, reason: str = "checked", **kw: Any):
    action = url("review-bulk-approve", tenant)
    return client.post(action, submitted(page, action, reason=reason), **kw)


def test_it_bulk_approves_only_the_filtered_requests_it_listed(client, tenant, reviewer):
    alpha = [pending(tenant, subject=f"user:a{n}", scope={"domain": "alpha"}) for n in range(2)]
    others = [pending(tenant, subject=f"user:b{n}", scope={"domain": "beta"}) for n in range(3)]
    others.append(
        pending(tenant, subject="user:r", scope={"domain": "beta"}, sensitivity="restricted")
    )
    client = signed_in(client, reviewer)
    page = bulk_confirm(client, tenant, domain="alpha")
    assert "Approve 2 requests?" in page
    assert "user:a0" in page
    assert "user:a1" in page
    assert "user:b0" not in page
    assert "user:r" not in page
    response = bulk_submit(client, tenant, page, follow=True)
    assert response.redirect_chain[-1][0] == url("review", tenant) + "?domain=alpha"
    assert "Approved 2 requests" in response.content.decode()
    assert [request_state(tenant, p)[0] for p in alpha] == ["approved"] * 2
    assert [request_state(tenant, p)[0] for p in others] == ["open"] * 4
    assert len(events(tenant, "promotion.approve")) == 2


def test_it_bulk_approves_the_filtered_selection_and_reports_refusals(client, tenant, reviewer):
    ones = [pending(tenant, subject=f"user:{n}") for n in range(3)]
    own = pending(tenant, subject="user:mine", writer=Actor.for_user(reviewer))
    other_key = pending(tenant, subject="user:9", key="billing.plan")
    client = signed_in(client, reviewer)
    page = bulk_confirm(client, tenant, key="shipping.")
    assert "Approve 4 requests?" in page
    response = bulk_submit(client, tenant, page, "verified against the CRM export", follow=True)
    html = response.content.decode()
    assert response.redirect_chain[-1][0] == url("review", tenant) + "?key=shipping."
    assert "Approved 3 requests" in html
    assert "1 could not be approved" in html
    assert "user:mine" in html
    assert [request_state(tenant, p)[0] for p in ones] == ["approved"] * 3
    assert request_state(tenant, own)[0] == "open"
    assert request_state(tenant, other_key)[0] == "open"
    assert len(events(tenant, "promotion.approve")) == 3


def test_it_does_not_bulk_approve_requests_that_arrived_after_the_confirmation(
    client, tenant, reviewer
):
    shown = pending(tenant, subject="user:1")
    client = signed_in(client, reviewer)
    page = bulk_confirm(client, tenant)
    late = pending(tenant, subject="user:2")
    bulk_submit(client, tenant, page)
    assert request_state(tenant, shown)[0] == "approved"
    assert request_state(tenant, late)[0] == "open"


def test_it_reports_listed_requests_decided_meanwhile_and_leaves_them(
    client, tenant, reviewer, member
):
    first, second = pending(tenant, subject="user:1"), pending(tenant, subject="user:2")
    client = signed_in(client, reviewer)
    page = bulk_confirm(client, tenant)
    with tenant_scope(tenant.pk):
        from apps.review.services import promotion_reject

        promotion_reject(request=second, actor=Actor.for_user(member), reason="not verified")
    response = bulk_submit(client, tenant, page, follow=True)
    html = response.content.decode()
    assert "Approved 1 request:" in html
    assert "1 of the 2 listed requests changed since the confirmation" in html
    assert request_state(tenant, first)[0] == "approved"
    assert request_state(tenant, second)[0] == "rejected"


def test_it_never_approves_an_id_added_to_the_snapshot_outside_the_filters(
    client, tenant, reviewer
):
    pending(tenant, subject="user:a", scope={"domain": "alpha"})
    outside = pending(tenant, subject="user:b", scope={"domain": "beta"})
    client = signed_in(client, reviewer)
    page = bulk_confirm(client, tenant, domain="alpha")
    action = url("review-bulk-approve", tenant)
    data = submitted(page, action, reason="checked")
    data["requests"].append(str(outside.pk))
    client.post(action, data)
    assert request_state(tenant, outside)[0] == "open"


def test_it_refuses_a_damaged_snapshot_and_changes_nothing(client, tenant, reviewer):
    promotion = pending(tenant)
    client = signed_in(client, reviewer)
    page = bulk_confirm(client, tenant)
    action = url("review-bulk-approve", tenant)
    data = submitted(page, action, reason="checked")
    data["requests"] = ["not-an-id"]
    response = client.post(action, data, follow=True)
    assert "damaged" in response.content.decode()
    assert request_state(tenant, promotion)[0] == "open"


def test_the_bulk_confirmation_lists_every_request_it_decides(client, tenant, reviewer):
    for n in range(29):
        pending(tenant, subject=f"user:{n:02d}")
    page = bulk_confirm(signed_in(client, reviewer), tenant)
    assert "Approve 29 requests?" in page
    listed = re.findall(r'<td class="mono">(user:\d+)</td>', page)
    assert sorted(listed) == [f"user:{n:02d}" for n in range(29)]
    assert "more" not in page.split('id="confirm-heading"')[1].split("<form")[0]


def test_it_caps_a_bulk_approval_at_the_limit_oldest_first(client, tenant, reviewer, monkeypatch):
    monkeypatch.setattr("apps.review.views.decisions.BULK_APPROVE_LIMIT", 2)
    requests = [pending(tenant, subject=f"user:{n}") for n in range(3)]
    client = signed_in(client, reviewer)
    page = bulk_confirm(client, tenant)
    assert "Approve 2 requests?" in page
    assert "oldest 2" in page
    bulk_submit(client, tenant, page)
    assert [request_state(tenant, r)[0] for r in requests] == ["approved", "approved", "open"]


def test_it_requires_a_reason_for_a_bulk_approval(client, tenant, reviewer):
    promotion = pending(tenant)
    client = signed_in(client, reviewer)
    page = bulk_confirm(client, tenant)
    response = bulk_submit(client, tenant, page, reason="")
    assert response.status_code == 400
    html = response.content.decode()
    assert "Say why you approve them" in html
    assert "Approve 1 request?" in html, "the same snapshot is shown again"
    assert request_state(tenant, promotion)[0] == "open"


def test_it_makes_a_repeated_bulk_approval_harmless(client, tenant, reviewer):
    pending(tenant, subject="user:1")
    client = signed_in(client, reviewer)
    page = bulk_confirm(client, tenant)
    bulk_submit(client, tenant, page)
    pending(tenant, subject="user:2")  # would match a second run of the same form
    again = bulk_submit(client, tenant, page, follow=True)
    assert "already submitted" in again.content.decode()
    with tenant_scope(tenant.pk):
        assert PromotionRequest.objects.filter(state="approved").count() == 1


# --- the conflict queue -------------------------------------------------------------------------


def test_it_shows_both_versions_side_by_side_with_provenance_and_history(client, tenant, reviewer):
    conflict_on(tenant)
    response = signed_in(client, reviewer).get(url("conflicts", tenant))
    html = response.content.decode()
    assert response.status_code == 200
    assert "1 open conflict" in html
    assert "Current value" in html
    assert "Contradicting value" in html
    assert "&quot;carrier_a&quot;" in html
    assert "&quot;carrier_b&quot;" in html
    assert "checkout-agent" in html
    assert "user:alice" in html
    assert "applied in checkout flow" in html
    assert "History of this fact (2 versions)" in html
    for resolution in ("keep_current", "accept_new", "corrected"):
        assert f'value="{resolution}"' in html


def test_it_says_what_happens_when_no_conflict_is_open(client, tenant, reviewer):
    html = signed_in(client, reviewer).get(url("conflicts", tenant)).content.decode()
    assert "No open conflicts" in html


def test_it_returns_only_the_results_to_an_htmx_conflict_page(client, tenant, reviewer):
    conflict_on(tenant)
    response = signed_in(client, reviewer).get(url("conflicts", tenant), headers=HTMX)
    html = response.content.decode()
    assert "<html" not in html
    assert 'id="conflict-results"' in html


def test_it_shows_a_conflict_with_its_whole_history(client, tenant, reviewer):
    conflict = conflict_on(tenant)
    response = signed_in(client, reviewer).get(url("conflict", tenant, conflict_id=conflict.pk))
    assert response.status_code == 200
    assert "History of this fact (2 versions)" in response.content.decode()


def resolve(client: Client, tenant: Tenant, conflict: Conflict, **data: Any) -> Any:
    headers = data.pop("headers", {})
    return client.post(
        url("conflict-resolve", tenant, conflict_id=conflict.pk), data, headers=headers
    )


def test_it_keeps_the_current_value(client, tenant, reviewer):
    conflict = conflict_on(tenant)
    response = resolve(
        signed_in(client, reviewer), tenant, conflict, resolution="keep_current", reason="stale"
    )
    assert response.status_code == 302
    assert response["Location"] == url("conflicts", tenant)
    row = conflict_row(tenant, conflict)
    assert (row.state, row.resolution, row.reason) == ("resolved", "keep_current", "stale")
    assert current_value(tenant, conflict) == "carrier_a"
    with tenant_scope(tenant.pk):
        assert MemoryRecord.objects.get(pk=conflict.contender_id).status == "superseded"


def test_it_accepts_the_new_value(client, tenant, reviewer):
    conflict = conflict_on(tenant)
    resolve(signed_in(client, reviewer), tenant, conflict, resolution="accept_new", reason="moved")
    assert conflict_row(tenant, conflict).resolution == "accept_new"
    assert current_value(tenant, conflict) == "carrier_b"
    with tenant_scope(tenant.pk):
        assert MemoryRecord.objects.get(pk=conflict.current_record_id).status == "superseded"


def test_it_writes_a_corrected_value_in_place_for_htmx(client, tenant, reviewer):
    conflict = conflict_on(tenant)
    response = resolve(
        signed_in(client, reviewer),
        tenant,
        conflict,
        resolution="corrected",
        value='{"carrier": "c"}',
        reason="both wrong",
        headers=HTMX,
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in html
    assert html.lstrip().startswith(f'<article id="conflict-{conflict.pk}"')
    assert "wrote a corrected value" in html
    assert current_value(tenant, conflict) == {"carrier": "c"}
    [event] = events(tenant, "conflict.resolve")
    assert (event.actor_type, event.actor_id) == ("user", str(reviewer.pk))
    # A person's correction is the one way to a user_action version, confirmed at once.
    with tenant_scope(tenant.pk):
        corrected = MemoryRecord.objects.get(pk=event.data["winner"])
    assert (corrected.source_kind, corrected.trust) == ("user_action", "confirmed")


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ("{carrier: c}", "Not valid JSON"),
        ("carrier_c", "Not valid JSON"),
        ("", "Write the corrected value as JSON"),
        ("null", "null is not a value"),
    ],
)
@pytest.mark.parametrize("headers", [{}, HTMX])
def test_it_refuses_a_bad_corrected_value_and_changes_nothing(
    client, tenant, reviewer, value, error, headers
):
    conflict = conflict_on(tenant)
    response = resolve(
        signed_in(client, reviewer),
        tenant,
        conflict,
        resolution="corrected",
        value=value,
        reason="fix",
        headers=headers,
    )
    html = response.content.decode()
    assert response.status_code == (200 if headers else 400)
    assert error in html
    assert 'aria-invalid="true"' in html
    assert conflict_row(tenant, conflict).state == "open"
    assert current_value(tenant, conflict) == "carrier_a"
    assert versions_of(tenant, conflict) == 2
    assert events(tenant, "conflict.resolve") == []


def test_it_requires_a_reason_and_a_resolution(client, tenant, reviewer):
    conflict = conflict_on(tenant)
    response = resolve(signed_in(client, reviewer), tenant, conflict, reason="", headers=HTMX)
    html = response.content.decode()
    assert "Choose how to resolve the conflict" in html
    assert "Say why" in html
    assert conflict_row(tenant, conflict).state == "open"


def test_it_makes_a_double_resolution_harmless(client, tenant, reviewer):
    conflict = conflict_on(tenant)
    client = signed_in(client, reviewer)
    resolve(client, tenant, conflict, resolution="accept_new", reason="moved", headers=HTMX)
    again = resolve(
        client, tenant, conflict, resolution="keep_current", reason="moved", headers=HTMX
    )
    html = again.content.decode()
    assert again.status_code == 200
    assert "already resolved" in html
    assert "accepted the new value" in html
    assert current_value(tenant, conflict) == "carrier_b"
    assert len(events(tenant, "conflict.resolve")) == 1


# --- bounded queries ----------------------------------------------------------------------------


def queries_for(client: Client, path: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(path)
    assert response.status_code == 200
    return len(captured.captured_queries)


def test_the_promotion_queue_runs_the_same_queries_for_more_rows(
    client, tenant, reviewer, django_assert_num_queries
):
    for n in range(2):
        pending(tenant, subject=f"user:{n}")
    client = signed_in(client, reviewer)
    few = queries_for(client, url("review", tenant))
    for n in range(2, 12):
        pending(tenant, subject=f"user:{n}")
        write(tenant, Actor("credential", f"third-{n}", "third"), subject=f"user:{n}")
    with django_assert_num_queries(few):
        html = client.get(url("review", tenant)).content.decode()
    assert "12 pending" in html


def test_the_conflict_queue_runs_the_same_queries_for_more_rows(
    client, tenant, reviewer, django_assert_num_queries
):
    conflict_on(tenant, subject="user:0")
    client = signed_in(client, reviewer)
    few = queries_for(client, url("conflicts", tenant))
    for n in range(1, 10):
        conflict_on(tenant, subject=f"user:{n}")
    with django_assert_num_queries(few):
        html = client.get(url("conflicts", tenant)).content.decode()
    assert "10 open conflicts" in html
