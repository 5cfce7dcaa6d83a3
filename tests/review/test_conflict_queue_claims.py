"""The conflict queue works like the promotion queue: claims (one conflict, the ticked ones or
the next batch; others see who holds each; anyone else's resolution, an agent's through the
API included, is a 409 naming the holder until the claim ends), grouping by key, subject or
domain, and bulk resolutions after a confirmation listing every conflict, each resolution
audited on its own and each refusal named."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.core.actors import Actor
from apps.records.models import Conflict
from apps.review.claims import CONFLICTS, claims_release, claims_take
from apps.review.models import ReviewClaim
from apps.review.services import Claimed, conflict_resolve
from apps.tenancy.context import tenant_scope
from apps.tenancy.models import Role
from tests.factories import person

from .test_console_review import (
    HTMX,
    conflict_on,
    conflict_row,
    current_value,
    events,
    signed_in,
    submitted,
    url,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def colleague(tenant):
    return person(tenant, "cole", Role.REVIEWER)


def _claim(tenant, user, *conflicts, minutes: int = 30):
    with tenant_scope(tenant.pk):
        return claims_take(
            tenant=tenant,
            request_ids=[c.pk for c in conflicts],
            actor=Actor.for_user(user),
            duration=timedelta(minutes=minutes),
            kind=CONFLICTS,
        )


def _holders(tenant) -> dict[str, str]:
    with tenant_scope(tenant.pk):
        return {
            str(claim.conflict_id): claim.holder_label
            for claim in ReviewClaim.objects.filter(
                expires_at__gt=timezone.now(), conflict__isnull=False
            )
        }


# --- claims ---------------------------------------------------------------------------------


def test_a_claimed_conflict_is_resolved_by_its_holder_alone(tenant, reviewer, colleague):
    conflict = conflict_on(tenant)
    outcome = _claim(tenant, colleague, conflict)
    assert [c.pk for c in outcome.done] == [conflict.pk]
    assert _claim(tenant, reviewer, conflict).held[0][1].holder_label == "cole"
    with tenant_scope(tenant.pk), pytest.raises(Claimed) as refused:
        conflict_resolve(
            conflict=conflict, actor=Actor.for_user(reviewer), resolution="accept_new", reason="x"
        )
    assert "cole is working on this conflict" in str(refused.value)
    assert refused.value.status == 409
    assert conflict_row(tenant, conflict).state == "open"
    with tenant_scope(tenant.pk):
        conflict_resolve(
            conflict=conflict, actor=Actor.for_user(colleague), resolution="accept_new", reason="x"
        )
    assert current_value(tenant, conflict) == "carrier_b"
    assert _holders(tenant) == {}, "a resolution ends the claim"
    claimed = events(tenant, "review.claim")[-1]
    assert claimed.object_type == "conflict"
    assert claimed.data["target"] == {"conflicts": [str(conflict.pk)]}


def test_a_released_or_lapsed_claim_holds_nothing(tenant, reviewer, colleague):
    first, second = conflict_on(tenant, subject="user:1"), conflict_on(tenant, subject="user:2")
    _claim(tenant, colleague, first, second)
    with tenant_scope(tenant.pk):
        released = claims_release(
            tenant=tenant, actor=Actor.for_user(colleague), request_ids=[first.pk], kind=CONFLICTS
        )
        ReviewClaim.objects.filter(conflict=second).update(expires_at=timezone.now())
    assert [c.pk for c in released.done] == [first.pk]
    assert events(tenant, "review.release")[0].data["target"] == {"conflicts": [str(first.pk)]}
    for conflict in (first, second):
        with tenant_scope(tenant.pk):
            conflict_resolve(
                conflict=conflict,
                actor=Actor.for_user(reviewer),
                resolution="keep_current",
                reason="ok",
            )
        assert conflict_row(tenant, conflict).state == "resolved"


def test_the_api_names_the_holder_in_the_listing_and_refuses_an_agent_with_409(
    tenant, colleague, review_agent
):
    held, free = conflict_on(tenant, subject="user:1"), conflict_on(tenant, subject="user:2")
    _claim(tenant, colleague, held)
    with tenant_scope(tenant.pk):
        until = ReviewClaim.objects.get(conflict=held).expires_at
    listed = review_agent.get("/api/v1/conflicts", {"state": "open"})
    assert listed.status_code == 200, listed.content
    items = {item["id"]: item for item in listed.json()["results"]}
    assert items[str(held.pk)]["claimed_by"] == "cole"
    assert items[str(held.pk)]["claimed_until"] == until.isoformat().replace("+00:00", "Z")
    assert (items[str(free.pk)]["claimed_by"], items[str(free.pk)]["claimed_until"]) == (None, None)

    refused = review_agent.post(
        f"/api/v1/conflicts/{held.pk}/resolve", {"resolution": "accept_new", "reason": "newer"}
    )
    assert refused.status_code == 409
    assert refused["Content-Type"] == "application/problem+json"
    assert refused.json()["claimed_by"] == "cole"
    assert refused.json()["claimed_until"].endswith("Z")
    assert conflict_row(tenant, held).state == "open"
    fine = review_agent.post(
        f"/api/v1/conflicts/{free.pk}/resolve", {"resolution": "accept_new", "reason": "newer"}
    )
    assert fine.status_code == 200, fine.content
    assert fine.json()["claimed_by"] is None


def test_the_queue_shows_holders_and_claims_from_a_row_redrawing_it(
    client, tenant, reviewer, colleague
):
    mine, theirs = conflict_on(tenant, subject="user:1"), conflict_on(tenant, subject="user:2")
    _claim(tenant, colleague, theirs)
    client = signed_in(client, reviewer)
    html = client.get(url("conflicts", tenant)).content.decode()
    assert "cole is on it" in html
    assert "You hold no conflict" in html
    answer = client.post(
        url("conflicts-claim", tenant),
        {"conflicts": [str(mine.pk), str(theirs.pk)], "action": "claim", "view": "list"},
        headers=HTMX,
    ).content.decode()
    assert f'<article id="conflict-{mine.pk}"' in answer
    assert 'hx-swap-oob="true"' in answer
    assert "Claimed 1 conflict until" in answer
    assert (
        "already claimed by someone else and stay theirs: user:2 · shipping.preference by cole"
        in answer
    )
    assert '<span id="claims-held" hx-swap-oob="true">You hold 1 conflict</span>' in answer
    assert _holders(tenant) == {str(mine.pk): "rhea", str(theirs.pk): "cole"}
    shown = client.get(url("conflicts", tenant), {"claim": "mine"}).content.decode()
    assert f'id="conflict-{mine.pk}"' in shown
    assert f'id="conflict-{theirs.pk}"' not in shown


def test_a_stale_tab_resolving_a_conflict_claimed_meanwhile_is_told_who_holds_it(
    client, tenant, reviewer, colleague
):
    conflict = conflict_on(tenant)
    client = signed_in(client, reviewer)
    assert "cole" not in client.get(url("conflicts", tenant)).content.decode()
    _claim(tenant, colleague, conflict)
    html = client.post(
        url("conflict-resolve", tenant, conflict_id=conflict.pk),
        {"resolution": "accept_new", "reason": "newer", "next": url("conflicts", tenant)},
        headers=HTMX,
    ).content.decode()
    assert html.lstrip().startswith(f'<article id="conflict-{conflict.pk}"')
    assert "cole is working on this conflict" in html
    assert 'role="alert"' in html
    assert "is-held" in html
    assert conflict_row(tenant, conflict).state == "open"


def test_claim_the_next_batch_and_release_all(client, tenant, reviewer, colleague):
    conflicts = [conflict_on(tenant, subject=f"user:{n}") for n in range(4)]
    _claim(tenant, colleague, conflicts[0])
    client = signed_in(client, reviewer)
    response = client.post(
        url("conflicts-claim-batch", tenant), {"size": "2", "next": url("conflicts", tenant)}
    )
    assert response.status_code == 302
    assert "claim=mine" in response["Location"]
    assert _holders(tenant) == {
        str(conflicts[0].pk): "cole",
        str(conflicts[1].pk): "rhea",
        str(conflicts[2].pk): "rhea",
    }
    bad = client.post(url("conflicts-claim-batch", tenant), {"size": "0"}, follow=True)
    assert "Claim at least one conflict." in bad.content.decode()
    released = client.post(url("conflicts-release-all", tenant), follow=True).content.decode()
    assert "Released 2 conflicts" in released
    assert _holders(tenant) == {str(conflicts[0].pk): "cole"}


# --- grouping and bulk resolutions ----------------------------------------------------------


def test_the_queue_groups_by_key_subject_or_domain_with_links_to_resolve_a_group(
    client, tenant, reviewer
):
    for n in range(3):
        conflict_on(tenant, subject=f"user:{n}")
    conflict_on(tenant, subject="user:9", key="contact.email", scope={"domain": "support"})
    client = signed_in(client, reviewer)
    html = client.get(url("conflicts", tenant), {"group": "key"}).content.decode()
    assert "4 open conflicts</span>, by key" in html
    rows = re.findall(r'<th scope="row"><a href="[^"]+"><span class="mono">([^<]+)</span>', html)
    assert rows == ["shipping.preference", "contact.email"]  # largest group first
    assert "Keep current for 3…" in html
    assert "Accept new for 1…" in html
    by_domain = client.get(url("conflicts", tenant), {"group": "domain"}).content.decode()
    assert re.search(
        r'<span class="mono">support</span></a></th>\s*<td class="num">1</td>', by_domain
    )
    by_subject = client.get(url("conflicts", tenant), {"group": "subject"}).content.decode()
    assert len(re.findall(r'<td class="num">1</td>', by_subject)) == 4
    # A group's link: the confirmation lists exactly its conflicts.
    link = re.search(r'href="([^"]+)">Accept new for 3…', html)
    assert link
    confirmation = client.get(link.group(1).replace("&amp;", "&")).content.decode()
    assert "Resolve 3 conflicts?" in confirmation
    assert "contact.email" not in confirmation
    assert re.search(r'value="accept_new"[^>]*checked', confirmation)


def test_a_bulk_resolution_resolves_each_and_names_every_refusal(
    client, tenant, reviewer, colleague
):
    """Four ticked conflicts: one a colleague claims after the confirmation was drawn, one
    resolved by someone else meanwhile; the other two go through, each audited on its own."""
    ok_1, ok_2, held, resolved = (conflict_on(tenant, subject=f"user:{n}") for n in range(4))
    client = signed_in(client, reviewer)
    confirmation = client.post(
        url("conflicts-selection", tenant),
        {
            "conflicts": [str(c.pk) for c in (ok_1, ok_2, held, resolved)],
            "resolution": "accept_new",
        },
    ).content.decode()
    assert "Resolve 4 conflicts?" in confirmation
    assert 'class="table-wrap bulk-list"' in confirmation  # the box that scrolls
    for n in range(4):
        assert f"user:{n}" in confirmation
    _claim(tenant, colleague, held)
    with tenant_scope(tenant.pk):
        conflict_resolve(
            conflict=resolved,
            actor=Actor.for_user(colleague),
            resolution="keep_current",
            reason="old",
        )
    action = url("conflicts-bulk-resolve", tenant)
    data = submitted(confirmation, action, reason="the document is newer", resolution="accept_new")
    page = client.post(action, data, follow=True).content.decode()
    assert "Resolved 2 conflicts: accepted the new value of each" in page
    assert "2 could not be resolved and stay as they are" in page
    assert "user:2 · shipping.preference: cole is working on this conflict" in page
    assert "user:3 · shipping.preference: already resolved by cole" in page
    assert [conflict_row(tenant, c).resolution for c in (ok_1, ok_2, held, resolved)] == [
        "accept_new",
        "accept_new",
        "",
        "keep_current",
    ]
    mine = [e for e in events(tenant, "conflict.resolve") if e.actor_label == "rhea"]
    assert sorted(e.object_id for e in mine) == sorted([str(ok_1.pk), str(ok_2.pk)])
    assert {e.data["reason"] for e in mine} == {"the document is newer"}
    again = client.post(action, data, follow=True).content.decode()
    assert "already submitted; nothing was repeated" in again


def test_a_bulk_resolution_refuses_a_corrected_value_or_no_reason(client, tenant, reviewer):
    conflict = conflict_on(tenant)
    client = signed_in(client, reviewer)
    action = url("conflicts-bulk-resolve", tenant)
    confirmation = client.get(action).content.decode()
    assert "Resolve 1 conflict?" in confirmation
    corrected = client.post(
        action, submitted(confirmation, action, reason="x", resolution="corrected")
    )
    assert corrected.status_code == 400
    assert "Select a valid choice" in corrected.content.decode()
    blank = client.post(
        action, submitted(confirmation, action, reason="", resolution="keep_current")
    )
    assert blank.status_code == 400
    assert "Say why you resolve them so" in blank.content.decode()
    assert conflict_row(tenant, conflict).state == "open"
    with tenant_scope(tenant.pk):
        assert Conflict.objects.filter(state="open").count() == 1
