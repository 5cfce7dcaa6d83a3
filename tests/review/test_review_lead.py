"""What a review lead sets and watches: canned reasons (defined per tenant, picked by id in a
decision, another tenant's id refused), the claim length, and each reviewer's throughput."""

from __future__ import annotations

import uuid

import pytest

from apps.core.actors import Actor
from apps.records.models import PromotionRequest
from apps.review.models import ReviewReason
from apps.review.reasons import review_reason_add
from apps.review.services import promotion_approve, promotion_reject
from apps.tenancy.context import tenant_scope
from apps.tenancy.models import Tenant

from .test_console_review import HTMX, events, pending, request_state, signed_in, url

pytestmark = pytest.mark.django_db


def _reason(tenant: Tenant, decision: str, text: str) -> ReviewReason:
    with tenant_scope(tenant.pk):
        return review_reason_add(
            tenant=tenant, decision=decision, text=text, actor=Actor.system("tests")
        )


def _reasons(tenant: Tenant) -> list[tuple[str, int, str]]:
    with tenant_scope(tenant.pk):
        return list(
            ReviewReason.objects.order_by("decision", "position").values_list(
                "decision", "position", "text"
            )
        )


# --- who may ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["review-settings", "review-throughput"])
@pytest.mark.parametrize("persona", ["reviewer", "member", "auditor"])
def test_only_a_lead_opens_the_review_settings_and_throughput(
    client, tenant, request, persona, name
):
    user = request.getfixturevalue(persona)
    assert signed_in(client, user).get(url(name, tenant)).status_code == 403


@pytest.mark.parametrize("name", ["review-settings", "review-throughput"])
def test_another_tenants_admin_finds_no_such_page(client, tenant, outsider, name):
    assert signed_in(client, outsider).get(url(name, tenant)).status_code == 404


# --- canned reasons -----------------------------------------------------------------------------


def test_a_lead_adds_reasons_on_the_next_key_and_it_is_audited(client, tenant, owner):
    client = signed_in(client, owner)
    for text in ("Duplicate of an existing fact", "Test data"):
        response = client.post(url("review-settings", tenant), {"decision": "reject", "text": text})
        assert response.status_code == 302
    client.post(url("review-settings", tenant), {"decision": "approve", "text": "Matches the CRM"})
    assert _reasons(tenant) == [
        ("approve", 1, "Matches the CRM"),
        ("reject", 1, "Duplicate of an existing fact"),
        ("reject", 2, "Test data"),
    ]
    page = client.get(url("review-settings", tenant)).content.decode()
    assert "Duplicate of an existing fact" in page
    assert [e.data["text"] for e in events(tenant, "review.reason_add")] == [
        "Matches the CRM",
        "Test data",
        "Duplicate of an existing fact",
    ]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"decision": "reject", "text": ""}, "Write the reason."),
        ({"decision": "reject", "text": "   "}, "Write the reason."),
        ({"decision": "maybe", "text": "why not"}, "Select a valid choice"),
        ({"decision": "reject", "text": "x" * 301}, "Keep it to 300 characters (this has 301)"),
        ({"decision": "reject", "text": "Test data"}, "That reason is already in the list."),
    ],
)
def test_a_bad_reason_is_a_form_error_and_adds_nothing(client, tenant, owner, data, message):
    _reason(tenant, "reject", "Test data")
    response = signed_in(client, owner).post(url("review-settings", tenant), data)
    assert response.status_code == 400
    assert message in response.content.decode()
    assert 'aria-invalid="true"' in response.content.decode()
    assert _reasons(tenant) == [("reject", 1, "Test data")]


def test_there_are_at_most_nine_reasons_per_decision(client, tenant, owner):
    for n in range(1, 10):
        _reason(tenant, "reject", f"reason {n}")
    response = signed_in(client, owner).post(
        url("review-settings", tenant), {"decision": "reject", "text": "a tenth"}
    )
    assert response.status_code == 400
    assert "There are already 9 canned reasons for rejecting" in response.content.decode()
    assert len(_reasons(tenant)) == 9


def test_removing_a_reason_moves_the_later_ones_up_a_key(client, tenant, owner):
    first = _reason(tenant, "reject", "first")
    _reason(tenant, "reject", "second")
    third = _reason(tenant, "reject", "third")
    client = signed_in(client, owner)
    client.post(url("review-reason-remove", tenant, reason_id=first.pk))
    assert _reasons(tenant) == [("reject", 1, "second"), ("reject", 2, "third")]
    client.post(url("review-reason-up", tenant, reason_id=third.pk))
    assert _reasons(tenant) == [("reject", 1, "third"), ("reject", 2, "second")]
    assert len(events(tenant, "review.reason_remove")) == 1
    assert len(events(tenant, "review.reason_move")) == 1


def test_another_tenants_reason_cannot_be_removed_or_moved(
    client, tenant, other_tenant, owner, outsider
):
    theirs = _reason(other_tenant, "reject", "theirs")
    client = signed_in(client, owner)
    assert client.post(url("review-reason-remove", tenant, reason_id=theirs.pk)).status_code == 404
    assert client.post(url("review-reason-up", tenant, reason_id=theirs.pk)).status_code == 404
    assert _reasons(other_tenant) == [("reject", 1, "theirs")]


def test_a_decision_with_a_canned_reason_keeps_its_text(client, tenant, reviewer):
    request = pending(tenant)
    reason = _reason(tenant, "reject", "Test data from staging")
    response = signed_in(client, reviewer).post(
        url("review-reject", tenant, request_id=request.pk),
        {"canned": str(reason.pk), "view": "list", "next": url("review", tenant)},
        headers=HTMX,
    )
    assert response.status_code == 200
    assert request_state(tenant, request)[0] == "rejected"
    with tenant_scope(tenant.pk):
        assert PromotionRequest.objects.get(pk=request.pk).decision_reason == (
            "Test data from staging"
        )


def test_the_queue_offers_the_canned_reasons_on_their_keys(client, tenant, reviewer):
    pending(tenant)
    _reason(tenant, "reject", "Duplicate")
    _reason(tenant, "approve", "Matches the CRM")
    html = signed_in(client, reviewer).get(url("review", tenant)).content.decode()
    assert 'data-canned-key="1"' in html
    assert "reject it because “Duplicate”" in html  # the keys overlay
    assert "Approve: Matches the CRM" in html  # the card's button
    assert '<datalist id="canned-approve">' in html


@pytest.mark.parametrize("which", ["other-tenant", "other-decision", "removed", "damaged"])
def test_a_canned_reason_that_is_not_this_decisions_is_refused(
    client, tenant, other_tenant, reviewer, which
):
    request = pending(tenant)
    canned = {
        "other-tenant": lambda: str(_reason(other_tenant, "reject", "Theirs").pk),
        "other-decision": lambda: str(_reason(tenant, "approve", "Matches").pk),
        "removed": lambda: str(uuid.uuid4()),
        "damaged": lambda: "not-an-id",
    }[which]()
    response = signed_in(client, reviewer).post(
        url("review-reject", tenant, request_id=request.pk),
        {"canned": canned, "view": "list", "next": url("review", tenant)},
        headers=HTMX,
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert 'aria-invalid="true"' in html
    assert "canned reason" in html
    assert request_state(tenant, request)[0] == "open"
    assert events(tenant, "promotion.reject") == []


def test_a_canned_reason_without_javascript_redirects_back(client, tenant, reviewer):
    request = pending(tenant)
    reason = _reason(tenant, "approve", "Matches the CRM")
    response = signed_in(client, reviewer).post(
        url("review-approve", tenant, request_id=request.pk), {"canned": str(reason.pk)}
    )
    assert response.status_code == 302
    assert request_state(tenant, request) == ("approved", "confirmed")


# --- claim length ---------------------------------------------------------------------------


def test_a_lead_sets_how_long_a_claim_lasts(client, tenant, owner):
    response = signed_in(client, owner).post(
        url("review-claim-duration", tenant), {"claim_minutes": "45"}
    )
    assert response.status_code == 302
    tenant.refresh_from_db()
    assert tenant.review_claim_duration.total_seconds() == 45 * 60
    [event] = events(tenant, "review.claim_duration")
    assert (event.data["before_minutes"], event.data["after_minutes"]) == (30, 45)


@pytest.mark.parametrize(
    ("minutes", "message"),
    [
        ("0", "A claim lasts at least 1 minute."),
        ("481", "A claim lasts at most 480 minutes (8 hours)."),
        ("half an hour", "as a whole number"),
        ("", "Say how many minutes a claim lasts."),
    ],
)
def test_a_bad_claim_length_is_a_form_error(client, tenant, owner, minutes, message):
    response = signed_in(client, owner).post(
        url("review-claim-duration", tenant), {"claim_minutes": minutes}
    )
    assert response.status_code == 400
    assert message in response.content.decode()
    tenant.refresh_from_db()
    assert tenant.review_claim_duration.total_seconds() == 30 * 60


# --- throughput -----------------------------------------------------------------------------


def test_throughput_counts_each_reviewers_decisions_and_reversals(
    client, tenant, owner, reviewer, review_agent
):
    from apps.review.services import promotion_reopen

    requests = [pending(tenant, subject=f"user:{n}") for n in range(4)]
    rhea, olivia = Actor.for_user(reviewer), Actor.for_user(owner)
    with tenant_scope(tenant.pk):
        promotion_approve(request=requests[0], actor=rhea, reason="ok")
        promotion_approve(request=requests[1], actor=rhea, reason="ok")
        rejected = promotion_reject(request=requests[2], actor=rhea, reason="no")
        promotion_reopen(request=rejected, actor=olivia, reason="mistake")
        promotion_reject(request=requests[3], actor=olivia, reason="no")
    html = signed_in(client, owner).get(url("review-throughput", tenant)).content.decode()
    rows = html.split("<tbody>")[1].split("</tbody>")[0].split("<tr>")[1:]
    assert "rhea" in rows[0], "busiest first"
    assert "olivia" in rows[1]
    cells = [cell.split("<")[0] for cell in rows[0].split('<td class="num">')[1:]]
    # last hour, day, week, pace, approved, rejected, resolved, reversals
    assert cells[:3] == ["3", "3", "3"]
    assert cells[3] == "3.0"
    assert cells[4:8] == ["2", "1", "0", "0"]
    olivia_cells = [cell.split("<")[0] for cell in rows[1].split('<td class="num">')[1:]]
    assert olivia_cells[0] == "1"
    assert olivia_cells[7] == "1", "the reopening counts as a reversal"
    assert "(person)" in rows[0]


def test_the_dashboard_gives_a_lead_the_days_decisions(client, tenant, owner, reviewer):
    request = pending(tenant)
    with tenant_scope(tenant.pk):
        promotion_approve(request=request, actor=Actor.for_user(reviewer), reason="ok")
    html = signed_in(client, owner).get(url("dashboard", tenant)).content.decode()
    assert "Review decisions, last 24 hours" in html
    assert url("review-throughput", tenant) in html
    client.logout()
    reviewers_view = signed_in(client, reviewer).get(url("dashboard", tenant)).content.decode()
    assert "Review decisions, last 24 hours" not in reviewers_view
