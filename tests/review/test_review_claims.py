"""Claims on promotion requests: a reviewer takes a batch so no one else works it; others see
who holds it and cannot decide it; claims expire, are released, end with the decision, are
audited, and never reach another tenant."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.core.actors import Actor
from apps.records.models import PromotionRequest
from apps.review.claims import ClaimError, claims_release, claims_take
from apps.review.models import ReviewClaim
from apps.review.services import Claimed, promotion_approve, promotion_reject
from apps.tenancy.context import tenant_scope
from apps.tenancy.models import Role
from tests.factories import person

from .test_console_review import HTMX, events, pending, request_state, signed_in, url

pytestmark = pytest.mark.django_db


@pytest.fixture
def colleague(tenant):
    """A second reviewer of the tenant."""
    return person(tenant, "cole", Role.REVIEWER)


def _claim(tenant, user, *requests, minutes: int = 30):
    with tenant_scope(tenant.pk):
        return claims_take(
            tenant=tenant,
            request_ids=[r.pk for r in requests],
            actor=Actor.for_user(user),
            duration=timedelta(minutes=minutes),
        )


def _claims(tenant) -> dict[str, str]:
    with tenant_scope(tenant.pk):
        return {
            str(claim.request_id): claim.holder_label
            for claim in ReviewClaim.objects.filter(expires_at__gt=timezone.now())
        }


# --- the service --------------------------------------------------------------------------------


def test_it_claims_open_requests_and_leaves_anothers_claim_alone(tenant, reviewer, colleague):
    first, second = pending(tenant, subject="user:1"), pending(tenant, subject="user:2")
    _claim(tenant, colleague, second)
    outcome = _claim(tenant, reviewer, first, second)
    assert [r.pk for r in outcome.done] == [first.pk]
    assert [(r.pk, c.holder_label) for r, c in outcome.held] == [(second.pk, "cole")]
    assert _claims(tenant) == {str(first.pk): "rhea", str(second.pk): "cole"}
    event = events(tenant, "review.claim")[0]  # newest first
    assert event.data["target"] == {"promotion_requests": [str(first.pk)]}
    assert event.actor_label == "rhea"


def test_it_refuses_a_decision_by_anyone_but_the_holder(tenant, reviewer, colleague):
    request = pending(tenant)
    _claim(tenant, colleague, request)
    with tenant_scope(tenant.pk), pytest.raises(Claimed) as refused:
        promotion_approve(request=request, actor=Actor.for_user(reviewer), reason="ok")
    assert "cole is working on this request" in str(refused.value)
    assert refused.value.status == 409
    with tenant_scope(tenant.pk), pytest.raises(Claimed):
        promotion_reject(request=request, actor=Actor.for_user(reviewer), reason="no")
    assert request_state(tenant, request) == ("open", "provisional")
    with tenant_scope(tenant.pk):
        promotion_approve(request=request, actor=Actor.for_user(colleague), reason="ok")
    assert request_state(tenant, request) == ("approved", "confirmed")
    assert _claims(tenant) == {}, "a decision ends the claim"


def test_an_expired_claim_holds_nothing_and_can_be_taken(tenant, reviewer, colleague):
    request = pending(tenant)
    _claim(tenant, colleague, request)
    with tenant_scope(tenant.pk):
        ReviewClaim.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
        promotion_reject(request=request, actor=Actor.for_user(reviewer), reason="duplicate")
    assert request_state(tenant, request)[0] == "rejected"
    other = pending(tenant, subject="user:2")
    _claim(tenant, colleague, other)
    with tenant_scope(tenant.pk):
        ReviewClaim.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert [r.pk for r in _claim(tenant, reviewer, other).done] == [other.pk]
    assert _claims(tenant) == {str(other.pk): "rhea"}


def test_it_renews_its_own_claim_and_counts_decided_requests_as_closed(tenant, reviewer):
    request, decided = pending(tenant, subject="user:1"), pending(tenant, subject="user:2")
    _claim(tenant, reviewer, request, minutes=5)
    with tenant_scope(tenant.pk):
        promotion_reject(request=decided, actor=Actor.for_user(reviewer), reason="no")
    outcome = _claim(tenant, reviewer, request, decided, minutes=60)
    assert [r.pk for r in outcome.done] == [request.pk]
    assert outcome.closed == 1
    with tenant_scope(tenant.pk):
        claim = ReviewClaim.objects.get(request=request)
    assert claim.expires_at > timezone.now() + timedelta(minutes=50)


def test_only_a_person_claims(tenant, agent):
    request = pending(tenant)
    with tenant_scope(tenant.pk), pytest.raises(ClaimError):
        claims_take(
            tenant=tenant, request_ids=[request.pk], actor=Actor.for_credential(agent.credential)
        )


def test_a_release_lets_go_of_ones_own_claims_only(tenant, reviewer, colleague):
    mine, theirs = pending(tenant, subject="user:1"), pending(tenant, subject="user:2")
    _claim(tenant, reviewer, mine)
    _claim(tenant, colleague, theirs)
    with tenant_scope(tenant.pk):
        outcome = claims_release(
            tenant=tenant, actor=Actor.for_user(reviewer), request_ids=[mine.pk, theirs.pk]
        )
    assert [r.pk for r in outcome.done] == [mine.pk]
    assert [r.pk for r, _ in outcome.held] == [theirs.pk]
    assert _claims(tenant) == {str(theirs.pk): "cole"}
    assert events(tenant, "review.release")[0].data["count"] == 1


def test_an_agent_decision_through_the_api_is_refused_while_a_person_holds_it(
    tenant, colleague, review_agent
):
    request = pending(tenant)
    _claim(tenant, colleague, request)
    response = review_agent.post(
        f"/api/v1/promotion-requests/{request.pk}/approve", {"reason": "matches"}
    )
    assert response.status_code == 409
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["claimed_by"] == "cole"
    assert response.json()["claimed_until"].endswith("Z")
    assert request_state(tenant, request) == ("open", "provisional")


def test_the_api_lists_who_holds_a_request_and_until_when(
    tenant, reviewer, colleague, review_agent
):
    held, free, lapsed = pending(tenant), pending(tenant, "user:2"), pending(tenant, "user:3")
    _claim(tenant, colleague, held)
    _claim(tenant, reviewer, lapsed)
    with tenant_scope(tenant.pk):
        until = ReviewClaim.objects.get(request=held).expires_at
        ReviewClaim.objects.filter(request=lapsed).update(expires_at=timezone.now())
    response = review_agent.get("/api/v1/promotion-requests", {"state": "open"})
    assert response.status_code == 200, response.content
    listed = {item["id"]: item for item in response.json()["results"]}
    assert listed[str(held.pk)]["claimed_by"] == "cole"
    assert listed[str(held.pk)]["claimed_until"] == until.isoformat().replace("+00:00", "Z")
    for unheld in (free, lapsed):
        assert listed[str(unheld.pk)]["claimed_by"] is None
        assert listed[str(unheld.pk)]["claimed_until"] is None


def test_deleting_the_record_takes_its_claim_with_it(tenant, reviewer, delete_agent):
    request = pending(tenant)
    _claim(tenant, reviewer, request)
    response = delete_agent.delete(f"/api/v1/records/{request.record_id}")
    assert response.status_code == 200, response.content[:300]
    with tenant_scope(tenant.pk):
        assert not ReviewClaim.objects.exists()
        assert not PromotionRequest.objects.exists()


# --- the console ----------------------------------------------------------------------------


def test_the_queue_shows_who_holds_each_request(client, tenant, reviewer, colleague):
    mine, theirs = pending(tenant, subject="user:1"), pending(tenant, subject="user:2")
    _claim(tenant, reviewer, mine)
    _claim(tenant, colleague, theirs)
    html = signed_in(client, reviewer).get(url("review", tenant)).content.decode()
    assert "cole is on it" in html
    assert "Yours" in html
    assert "You hold 1 request" in html


def test_c_claims_from_the_list_and_answers_with_the_row_redrawn(client, tenant, reviewer):
    request = pending(tenant)
    response = signed_in(client, reviewer).post(
        url("review-claim", tenant),
        {"requests": str(request.pk), "action": "claim", "view": "list", "focused": request.pk},
        headers=HTMX,
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert f'id="row-{request.pk}"' in html
    assert 'hx-swap-oob="true"' in html
    assert f'id="request-{request.pk}"' in html  # the focused card too
    assert "Claimed 1 request until" in html
    assert '<span id="claims-held" hx-swap-oob="true">You hold 1 request</span>' in html
    assert _claims(tenant) == {str(request.pk): "rhea"}


def test_a_stale_tab_is_told_who_claimed_the_request_meanwhile(client, tenant, reviewer, colleague):
    """The page was drawn before a colleague claimed the request: approving it is refused,
    the card says who holds it and the row is redrawn with the claim."""
    request = pending(tenant)
    page = signed_in(client, reviewer).get(url("review", tenant)).content.decode()
    assert "cole" not in page
    _claim(tenant, colleague, request)
    response = client.post(
        url("review-approve", tenant, request_id=request.pk),
        {"view": "list", "reason": "matches the CRM", "next": url("review", tenant)},
        headers=HTMX,
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert "cole is working on this request" in html
    assert 'role="alert"' in html
    assert f'<li id="row-{request.pk}" class="triage-row is-held"' in html
    assert "hx-swap-oob" in html
    assert request_state(tenant, request) == ("open", "provisional")
    # The same tab then tries to claim it: refused, with the holder named.
    claim = client.post(
        url("review-claim", tenant),
        {"requests": str(request.pk), "action": "claim", "view": "list"},
        headers=HTMX,
    ).content.decode()
    assert "already claimed by someone else and stay theirs" in claim
    assert "by cole until" in claim
    assert _claims(tenant) == {str(request.pk): "cole"}


def test_a_bulk_approval_leaves_requests_claimed_by_others(client, tenant, reviewer, colleague):
    from .test_console_review import submitted

    first, second = pending(tenant, subject="user:1"), pending(tenant, subject="user:2")
    client = signed_in(client, reviewer)
    _claim(tenant, colleague, first)
    confirmation = client.get(url("review-bulk-approve", tenant)).content.decode()
    assert "cole holds it" in confirmation, "the confirmation marks what others hold"
    with tenant_scope(tenant.pk):
        ReviewClaim.objects.all().delete()
    confirmation = client.get(url("review-bulk-approve", tenant)).content.decode()
    _claim(tenant, colleague, second)
    data = submitted(confirmation, url("review-bulk-approve", tenant), reason="verified")
    response = client.post(url("review-bulk-approve", tenant), data, follow=True)
    assert "1 could not be approved and stay pending" in response.content.decode()
    assert request_state(tenant, first)[0] == "approved"
    assert request_state(tenant, second)[0] == "open"
    assert "cole is working on this request" in response.content.decode()


def test_claim_the_next_batch_takes_only_what_no_one_else_holds(
    client, tenant, reviewer, colleague
):
    requests = [pending(tenant, subject=f"user:{n}") for n in range(4)]
    _claim(tenant, colleague, requests[0])
    response = signed_in(client, reviewer).post(
        url("review-claim-batch", tenant), {"size": "2", "next": url("review", tenant)}
    )
    assert response.status_code == 302
    assert "claim=mine" in response["Location"]
    assert _claims(tenant) == {
        str(requests[0].pk): "cole",
        str(requests[1].pk): "rhea",
        str(requests[2].pk): "rhea",
    }
    mine = client.get(response["Location"]).content.decode()
    assert f'id="row-{requests[1].pk}"' in mine
    assert f'id="row-{requests[0].pk}"' not in mine
    assert "2 pending matching these filters" in mine


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"size": "0"}, "Claim at least one request."),
        ({"size": "500"}, "One claim takes at most 50 requests."),
        ({"size": "lots"}, "Say how many requests to claim, as a number."),
        ({"size": "2", "age": "eleven"}, "Select a valid choice"),
    ],
)
def test_a_bad_batch_claim_says_why_and_claims_nothing(client, tenant, reviewer, data, message):
    pending(tenant)
    client = signed_in(client, reviewer)
    response = client.post(url("review-claim-batch", tenant), data, follow=True)
    assert message in response.content.decode()
    assert _claims(tenant) == {}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"action": "claim"}, "Select the requests to claim or release first."),
        ({"action": "claim", "requests": "not-a-uuid"}, "This confirmation is damaged"),
        ({"action": "grab", "requests": "00000000-0000-0000-0000-000000000001"}, "Say whether"),
    ],
)
def test_a_bad_claim_says_why_and_claims_nothing(client, tenant, reviewer, data, message):
    pending(tenant)
    response = signed_in(client, reviewer).post(
        url("review-claim", tenant), {**data, "view": "list"}, headers=HTMX
    )
    assert response.status_code == 200
    assert message in response.content.decode()
    assert _claims(tenant) == {}


def test_another_tenants_request_ids_claim_nothing(client, tenant, other_tenant, reviewer):
    theirs = pending(other_tenant)
    response = signed_in(client, reviewer).post(
        url("review-claim", tenant),
        {"requests": str(theirs.pk), "action": "claim", "view": "list"},
        headers=HTMX,
    )
    assert response.status_code == 200
    assert "decided meanwhile (or no longer exist)" in response.content.decode()
    assert _claims(other_tenant) == {}
    assert _claims(tenant) == {}


def test_release_all_lets_go_of_every_claim_of_mine(client, tenant, reviewer, colleague):
    mine = [pending(tenant, subject=f"user:{n}") for n in range(2)]
    theirs = pending(tenant, subject="user:9")
    _claim(tenant, reviewer, *mine)
    _claim(tenant, colleague, theirs)
    response = signed_in(client, reviewer).post(url("review-release-all", tenant), follow=True)
    assert "Released 2 requests" in response.content.decode()
    assert _claims(tenant) == {str(theirs.pk): "cole"}


def test_the_queue_filters_by_claim(client, tenant, reviewer, colleague):
    mine, theirs, free = (pending(tenant, subject=f"user:{n}") for n in range(3))
    _claim(tenant, reviewer, mine)
    _claim(tenant, colleague, theirs)
    client = signed_in(client, reviewer)

    def shown(claim: str) -> set[str]:
        html = client.get(url("review", tenant), {"claim": claim}).content.decode()
        return {str(r.pk) for r in (mine, theirs, free) if f'id="row-{r.pk}"' in html}

    assert shown("mine") == {str(mine.pk)}
    assert shown("available") == {str(mine.pk), str(free.pk)}
    assert shown("others") == {str(theirs.pk)}


def test_a_claim_from_the_requests_own_page_works_without_javascript(client, tenant, reviewer):
    request = pending(tenant)
    client = signed_in(client, reviewer)
    page = client.get(url("review-request", tenant, request_id=request.pk)).content.decode()
    assert 'name="action" value="claim"' in page
    back = url("review-request", tenant, request_id=request.pk)
    response = client.post(
        url("review-claim", tenant), {"requests": str(request.pk), "action": "claim", "next": back}
    )
    assert response.status_code == 302
    assert response["Location"] == back
    assert "Yours" in client.get(back).content.decode()
    assert _claims(tenant) == {str(request.pk): "rhea"}
    offsite = client.post(
        url("review-claim", tenant),
        {"requests": str(request.pk), "action": "release", "next": "https://evil.example/"},
    )
    assert offsite["Location"] == url("review", tenant), "never off-site"
