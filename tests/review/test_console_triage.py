"""The promotion queue worked at volume: the triage list's decisions (the row leaves, the
count and the next card come in the same answer), reversing a decision (undo and "return to
provisional"), and deciding a selection through the bulk confirmation's snapshot."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.core.actors import Actor
from apps.records.models import MemoryRecord
from apps.records.services import RecordError
from apps.review.services import (
    promotion_approve,
    promotion_reject,
    promotion_reopen,
    promotion_return_to_provisional,
)
from apps.tenancy.context import tenant_scope

from .test_console_review import (
    HTMX,
    events,
    pending,
    request_state,
    signed_in,
    submitted,
    url,
)

pytestmark = pytest.mark.django_db

LIST = {"view": "list", "reason": "matches the CRM record"}
LEAD = Actor(type="user", id="lead-1", label="lead")


def test_it_shows_the_queue_as_compact_rows_with_the_first_card_beside_them(
    client, tenant, reviewer
):
    first = pending(tenant, subject="user:1")
    second = pending(tenant, subject="user:2")
    html = signed_in(client, reviewer).get(url("review", tenant)).content.decode()
    assert f'id="row-{first.pk}"' in html
    assert f'id="row-{second.pk}"' in html
    assert 'id="review-detail"' in html
    assert f'id="request-{first.pk}"' in html  # the detail pane opens on the oldest
    assert f'id="request-{second.pk}"' not in html
    assert "expires in" in html


def test_it_answers_a_list_decision_with_the_row_gone_the_count_and_the_next_card(
    client, tenant, reviewer
):
    first = pending(tenant, subject="user:1")
    second = pending(tenant, subject="user:2")
    pending(tenant, subject="user:3")
    response = signed_in(client, reviewer).post(
        url("review-approve", tenant, request_id=first.pk),
        {**LIST, "then": str(second.pk), "next": url("review", tenant)},
        headers=HTMX,
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert f'<li id="row-{first.pk}" hx-swap-oob="delete">' in html
    assert '<span id="review-count" hx-swap-oob="true">2 pending</span>' in html
    assert f'id="request-{second.pk}"' in html  # the next card, in the same answer
    assert "Undo" in html
    assert request_state(tenant, first) == ("approved", "confirmed")


def test_it_reports_a_list_decision_once_in_its_undo_notice(client, tenant, reviewer):
    first = pending(tenant, subject="user:1")
    pending(tenant, subject="user:2")
    signed_in(client, reviewer)
    response = client.post(
        url("review-approve", tenant, request_id=first.pk),
        {**LIST, "next": url("review", tenant)},
        headers=HTMX,
    )
    html = response.content.decode()
    assert html.count("the record is confirmed") == 1
    toast = re.search(r'<div id="review-toast".*?</div>', html, re.S)
    assert toast is not None
    assert "the record is confirmed" in toast.group(0)
    messages = re.search(r'<div id="messages".*?</div>', html, re.S)
    assert messages is not None
    assert "Approved" not in messages.group(0)
    # Nor is it kept for the next page.
    assert "Approved" not in client.get(url("review", tenant)).content.decode()


def test_it_counts_under_the_filters_of_the_page_the_decision_came_from(client, tenant, reviewer):
    first = pending(tenant, subject="user:1", scope={"domain": "alpha"})
    pending(tenant, subject="user:2", scope={"domain": "alpha"})
    pending(tenant, subject="user:3", scope={"domain": "beta"})
    response = signed_in(client, reviewer).post(
        url("review-approve", tenant, request_id=first.pk),
        {**LIST, "next": url("review", tenant) + "?domain=alpha"},
        headers=HTMX,
    )
    assert "1 pending matching these filters" in response.content.decode()


def test_it_keeps_the_row_when_a_list_decision_is_refused(client, tenant, reviewer):
    own = pending(tenant, writer=Actor.for_user(reviewer))
    response = signed_in(client, reviewer).post(
        url("review-approve", tenant, request_id=own.pk), LIST, headers=HTMX
    )
    html = response.content.decode()
    assert 'hx-swap-oob="delete"' not in html
    assert "cannot promote its own record" in html
    assert request_state(tenant, own) == ("open", "provisional")


def test_it_opens_a_rows_card_for_the_detail_pane(client, tenant, reviewer):
    item = pending(tenant)
    response = signed_in(client, reviewer).get(
        url("review-request", tenant, request_id=item.pk), LIST, headers=HTMX
    )
    html = response.content.decode()
    assert html.lstrip().startswith("<article")
    assert 'hx-target="#review-detail"' in html


def test_it_undoes_an_approval_from_the_list_and_puts_the_row_back(client, tenant, reviewer):
    item = pending(tenant)
    client = signed_in(client, reviewer)
    client.post(url("review-approve", tenant, request_id=item.pk), LIST, headers=HTMX)
    response = client.post(
        url("review-reverse", tenant, request_id=item.pk),
        {**LIST, "reason": "Undone from the review queue right after deciding."},
        headers=HTMX,
    )
    html = response.content.decode()
    assert '<ol id="review-list" hx-swap-oob="afterbegin">' in html
    assert f'id="row-{item.pk}"' in html
    assert '<span id="review-count" hx-swap-oob="true">1 pending</span>' in html
    assert request_state(tenant, item) == ("open", "provisional")
    (event,) = events(tenant, "promotion.return_to_provisional")
    assert event.data["reason"].startswith("Undone")
    assert event.data["target"]["record"] == str(item.record_id)
    assert event.data["target"]["subject"] == item.record.subject


def test_it_returns_an_approval_to_provisional_without_javascript(client, tenant, reviewer):
    item = pending(tenant)
    with tenant_scope(tenant.pk):
        promotion_approve(request=item, actor=LEAD, reason="checked")
    client = signed_in(client, reviewer)
    page = client.get(url("review-request", tenant, request_id=item.pk)).content.decode()
    assert "Return to provisional" in page
    response = client.post(
        url("review-reverse", tenant, request_id=item.pk), {"reason": "wrong customer"}
    )
    assert response.status_code == 302
    assert request_state(tenant, item) == ("open", "provisional")
    with tenant_scope(tenant.pk):
        record = MemoryRecord.objects.get(pk=item.record_id)
    assert record.expires_at is not None
    assert record.expires_at < record.written_at + timedelta(days=31)  # the provisional clock


def test_it_requires_a_reason_to_reverse_and_changes_nothing(client, tenant, reviewer):
    item = pending(tenant)
    with tenant_scope(tenant.pk):
        promotion_approve(request=item, actor=LEAD, reason="checked")
    response = signed_in(client, reviewer).post(
        url("review-reverse", tenant, request_id=item.pk), {"reason": ""}
    )
    assert response.status_code == 400
    assert "Say why the decision is reversed" in response.content.decode()
    assert request_state(tenant, item) == ("approved", "confirmed")


def test_it_reopens_a_rejection(client, tenant, reviewer):
    item = pending(tenant)
    with tenant_scope(tenant.pk):
        promotion_reject(request=item, actor=LEAD, reason="no")
    signed_in(client, reviewer).post(
        url("review-reverse", tenant, request_id=item.pk), {"reason": "misread the ticket"}
    )
    assert request_state(tenant, item) == ("open", "provisional")
    (event,) = events(tenant, "promotion.reopen")
    assert event.data["reason"] == "misread the ticket"
    assert event.data["target"]["record"] == str(item.record_id)


def test_it_forbids_reversals_to_members_and_hides_other_tenants(
    client, tenant, other_tenant, member, reviewer
):
    theirs = pending(other_tenant)
    ours = pending(tenant, subject="user:2")
    with tenant_scope(tenant.pk):
        promotion_approve(request=ours, actor=LEAD, reason="checked")
    member_client = signed_in(client, member)
    forbidden = member_client.post(
        url("review-reverse", tenant, request_id=ours.pk), {"reason": "x"}
    )
    assert forbidden.status_code == 403
    client.logout()
    hidden = signed_in(client, reviewer).post(
        url("review-reverse", tenant, request_id=theirs.pk), {"reason": "x"}
    )
    assert hidden.status_code == 404
    assert request_state(tenant, ours) == ("approved", "confirmed")


def test_return_to_provisional_refuses_what_its_provisional_clock_already_ended(tenant):
    item = pending(tenant)
    with tenant_scope(tenant.pk):
        promotion_approve(request=item, actor=LEAD, reason="checked")
        MemoryRecord.objects.filter(pk=item.record_id).update(
            written_at=timezone.now() - timedelta(days=60)
        )
        with pytest.raises(RecordError, match="provisional lifetime has already ended"):
            promotion_return_to_provisional(request=item, actor=LEAD, reason="oops")
    assert request_state(tenant, item) == ("approved", "confirmed")


def test_reversals_refuse_a_request_in_the_other_state(tenant):
    item = pending(tenant)
    with tenant_scope(tenant.pk):
        with pytest.raises(RecordError, match="not approved"):
            promotion_return_to_provisional(request=item, actor=LEAD, reason="x")
        with pytest.raises(RecordError, match="not rejected"):
            promotion_reopen(request=item, actor=LEAD, reason="x")


# --- selection ------------------------------------------------------------------------------


def test_it_confirms_exactly_the_selected_requests_and_rejects_those(client, tenant, reviewer):
    items = [pending(tenant, subject=f"user:{n}") for n in range(4)]
    client = signed_in(client, reviewer)
    chosen = [items[1], items[2]]
    page = client.post(
        url("review-selection", tenant),
        {"requests": [str(item.pk) for item in chosen], "decision": "reject"},
    ).content.decode()
    assert "Reject 2 requests?" in page
    assert "user:1" in page
    assert "user:2" in page
    assert "user:0" not in page
    assert "user:3" not in page
    # Meanwhile another reviewer approves one of them: it is left as it is.
    with tenant_scope(tenant.pk):
        promotion_approve(request=items[2], actor=LEAD, reason="checked")
    action = url("review-bulk-approve", tenant)
    response = client.post(action, submitted(page, action, reason="staging data"), follow=True)
    html = response.content.decode()
    assert "Rejected 1 request" in html
    assert "1 of the 2 listed requests changed" in html
    states = [request_state(tenant, item)[0] for item in items]
    assert states == ["open", "rejected", "approved", "open"]


def test_it_keeps_a_selection_within_the_queues_filters(client, tenant, reviewer):
    alpha = pending(tenant, subject="user:1", scope={"domain": "alpha"})
    beta = pending(tenant, subject="user:2", scope={"domain": "beta"})
    page = (
        signed_in(client, reviewer)
        .post(
            url("review-selection", tenant),
            {"requests": [str(alpha.pk), str(beta.pk)], "decision": "approve", "domain": "alpha"},
        )
        .content.decode()
    )
    assert "Approve 1 request?" in page
    assert "user:2" not in page


def test_it_sends_an_empty_selection_back_to_the_queue(client, tenant, reviewer):
    response = signed_in(client, reviewer).post(
        url("review-selection", tenant), {"decision": "approve"}, follow=True
    )
    assert response.redirect_chain[-1][0] == url("review", tenant)
    assert "lists no request" in response.content.decode()


def test_it_confirms_a_bulk_rejection_of_everything_matching(client, tenant, reviewer):
    pending(tenant, subject="user:1")
    html = (
        signed_in(client, reviewer)
        .get(url("review-bulk-approve", tenant), {"decision": "reject"})
        .content.decode()
    )
    assert "Reject 1 request?" in html
    assert "Reason for rejecting these" in html


# --- order ----------------------------------------------------------------------------------


def _row_subjects(html: str) -> list[str]:
    return re.findall(r'class="triage-title"[^>]*><span class="mono">([^<]+)<', html)


def test_it_sorts_the_queue_most_sensitive_first_and_pages_on(
    client, tenant, reviewer, monkeypatch
):
    monkeypatch.setattr("apps.review.views.decisions.QUEUE_PAGE_SIZE", 2)
    pending(tenant, subject="user:public", sensitivity="public")
    pending(tenant, subject="user:internal", sensitivity="internal")
    pending(tenant, subject="user:restricted", sensitivity="restricted")
    pending(tenant, subject="user:personal", sensitivity="personal")
    client = signed_in(client, reviewer)
    first = client.get(url("review", tenant), {"sort": "sensitivity"}).content.decode()
    assert _row_subjects(first) == ["user:restricted", "user:personal"]
    later = re.search(r'href="([^"]+)"[^>]*rel="next"', first)
    assert later
    assert "sort=sensitivity" in later.group(1)
    second = client.get(later.group(1).replace("&amp;", "&")).content.decode()
    assert _row_subjects(second) == ["user:internal", "user:public"]
    assert "Back to the first page" in second


def test_it_sorts_the_queue_by_the_provisional_records_expiry(client, tenant, reviewer):
    pending(tenant, subject="user:later", retention__ttl="P20D")
    pending(tenant, subject="user:soon", retention__ttl="P2D")
    pending(tenant, subject="user:middle", retention__ttl="P10D")
    html = signed_in(client, reviewer).get(url("review", tenant), {"sort": "expiry"})
    assert _row_subjects(html.content.decode()) == ["user:soon", "user:middle", "user:later"]


def test_it_refuses_an_unknown_order_with_a_clear_error(client, tenant, reviewer):
    response = signed_in(client, reviewer).get(url("review", tenant), {"sort": "random()"})
    assert response.status_code == 200
    assert "Check the filters" in response.content.decode()


def test_the_detail_panes_card_returns_to_the_filtered_queue_it_sits_in(client, tenant, reviewer):
    item = pending(tenant, scope={"domain": "alpha"})
    queue = url("review", tenant) + "?domain=alpha"
    response = signed_in(client, reviewer).get(
        url("review-request", tenant, request_id=item.pk),
        LIST,
        headers={**HTMX, "HX-Current-URL": f"http://testserver{queue}"},
    )
    assert f'name="next" value="{queue}"' in response.content.decode()
