"""The console's memory browser: list, search and filters, a memory's page with its provenance,
deletion with a dry run and a receipt, redaction; per persona, with bounded queries."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from apps.audit.models import AuditEvent, DeletionReceipt
from apps.console import memories as memory_views
from apps.core.actors import Actor
from apps.derivations.models import Summary
from apps.derivations.services import summary_create
from apps.governance import services as governance
from apps.records import services
from apps.records.models import MemoryRecord
from apps.records.serializers import write_input
from apps.review import services as review_services
from apps.tenancy.context import tenant_scope
from apps.tenancy.models import Tenant
from tests.factories import EmbeddingFactory

from .factories import body

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}
WRITER = Actor.system("importer")
NESTED = {"address": {"street": "Hauptstrasse 5", "city": "Berlin"}, "carrier": "dhl"}


# --- helpers ------------------------------------------------------------------------------------


def url(name: str, tenant: Tenant, **kwargs: Any) -> str:
    return reverse(f"console:{name}", kwargs={"tenant_slug": tenant.slug, **kwargs})


def signed_in(client: Client, user: Any) -> Client:
    client.force_login(user)
    return client


def write(tenant: Tenant, actor: Actor = WRITER, **overrides: Any) -> MemoryRecord:
    with tenant_scope(tenant.pk):
        return services.record_write(
            tenant=tenant, actor=actor, data=write_input(body(**overrides))
        ).record


def nonce_of(html: str) -> str:
    match = re.search(r'name="nonce" value="([^"]+)"', html)
    assert match, "the form carries a nonce"
    return match.group(1)


def exists(tenant: Tenant, record_id: Any) -> bool:
    with tenant_scope(tenant.pk):
        return MemoryRecord.objects.filter(pk=record_id).exists()


def reload(tenant: Tenant, record_id: Any) -> MemoryRecord:
    with tenant_scope(tenant.pk):
        return MemoryRecord.objects.get(pk=record_id)


def events(tenant: Tenant, action: str) -> list[AuditEvent]:
    with tenant_scope(tenant.pk):
        return list(AuditEvent.objects.filter(action=action).order_by("seq"))


def receipts(tenant: Tenant) -> list[DeletionReceipt]:
    with tenant_scope(tenant.pk):
        return list(DeletionReceipt.objects.order_by("deleted_at"))


def embed(tenant: Tenant, record: MemoryRecord, model: str = "hashing-256") -> None:
    EmbeddingFactory(tenant=tenant, record=record, model=model, vector=[0.5] * 256)


def summarise(tenant: Tenant, *records: MemoryRecord) -> Summary:
    with tenant_scope(tenant.pk):
        return summary_create(
            tenant=tenant,
            actor=WRITER,
            text="prefers dhl to Berlin",
            sources=[{"type": "record", "id": str(r.pk)} for r in records],
            reason="context for checkout",
        )


def hold(tenant: Tenant, subject: str) -> None:
    with tenant_scope(tenant.pk):
        governance.legal_hold_place(
            tenant=tenant, actor=WRITER, reason="litigation 42", subject=subject
        )


def delete_post(
    client: Client, tenant: Tenant, record: MemoryRecord, reason: str = "asked by the customer"
) -> Any:
    page = client.get(url("memory-delete", tenant, record_id=record.pk))
    nonce = nonce_of(page.content.decode())
    return client.post(
        url("memory-delete", tenant, record_id=record.pk), {"reason": reason, "nonce": nonce}
    )


def redact_post(
    client: Client, tenant: Tenant, record: MemoryRecord, parts: list[str], **headers: str
) -> Any:
    page = client.get(url("memory-redact", tenant, record_id=record.pk))
    nonce = nonce_of(page.content.decode())
    return client.post(
        url("memory-redact", tenant, record_id=record.pk),
        {"parts": parts, "reason": "customer asked", "nonce": nonce},
        headers=headers,
    )


# --- access -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["memories"])
def test_it_redirects_anonymous_people_to_the_login_page(client, tenant, name):
    response = client.get(url(name, tenant))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("console:login"))


@pytest.mark.parametrize("persona", ["owner", "member", "reviewer", "auditor"])
def test_it_lets_every_role_browse_memories(client, tenant, persona, request):
    record = write(tenant, subject="user:7001")
    signed_in(client, request.getfixturevalue(persona))
    listing = client.get(url("memories", tenant))
    detail = client.get(url("memory", tenant, record_id=record.pk))
    assert listing.status_code == 200
    assert "user:7001" in listing.content.decode()
    assert detail.status_code == 200


def test_it_hides_the_memories_of_a_tenant_from_outsiders(client, tenant, outsider):
    write(tenant)
    signed_in(client, outsider)
    assert client.get(url("memories", tenant)).status_code == 404


def test_it_answers_404_for_another_tenants_record_id(client, tenant, other_tenant, outsider):
    theirs = write(tenant, subject="user:secret")
    signed_in(client, outsider)
    for name in ("memory", "memory-delete", "memory-redact"):
        response = client.get(url(name, other_tenant, record_id=theirs.pk))
        assert response.status_code == 404, name
    response = client.post(
        url("memory-delete", other_tenant, record_id=theirs.pk), {"reason": "x", "nonce": "n"}
    )
    assert response.status_code in (302, 404)
    assert exists(tenant, theirs.pk)


def test_it_answers_404_for_an_unknown_record_id(client, tenant, member):
    signed_in(client, member)
    assert client.get(url("memory", tenant, record_id=uuid.uuid4())).status_code == 404


def test_it_shows_the_nav_link_to_memories(client, tenant, member):
    signed_in(client, member)
    html = client.get(url("memories", tenant)).content.decode()
    assert f'href="{url("memories", tenant)}" aria-current="page"' in html


# --- list, filters, search ----------------------------------------------------------------------


def test_it_lists_the_newest_memories_first(client, tenant, member):
    write(tenant, subject="user:1", source__ref="r:1")
    write(tenant, subject="user:2", source__ref="r:2")
    signed_in(client, member)
    html = client.get(url("memories", tenant)).content.decode()
    assert html.index("user:2") < html.index("user:1")


def test_it_shows_an_empty_state_that_says_what_to_do(client, tenant, member):
    signed_in(client, member)
    html = client.get(url("memories", tenant)).content.decode()
    assert "No memories yet" in html


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({"subject": "user:10"}, {"user:10"}),
        ({"key": "language"}, {"user:11"}),
        ({"domain": "support"}, {"user:12"}),
        ({"sensitivity": "public"}, {"user:12"}),
        ({"trust": "provisional"}, {"user:10", "user:11", "user:12"}),
        ({"trust": "confirmed"}, set()),
        ({"status": "active"}, {"user:10", "user:11", "user:12"}),
    ],
)
def test_it_filters_the_list(client, tenant, member, filters, expected):
    write(tenant, subject="user:10", source__ref="r:10")
    write(tenant, subject="user:11", key="language", value="de", source__ref="r:11")
    write(
        tenant,
        subject="user:12",
        scope={"domain": "support"},
        sensitivity="public",
        source__ref="r:12",
    )
    signed_in(client, member)
    html = client.get(url("memories", tenant), filters).content.decode()
    shown = {s for s in ("user:10", "user:11", "user:12") if f">{s} ·" in html}
    assert shown == expected


def test_it_rejects_a_bad_filter_with_a_form_error(client, tenant, member):
    write(tenant)
    signed_in(client, member)
    response = client.get(url("memories", tenant), {"trust": "certain"})
    assert response.status_code == 200
    assert "Check the search" in response.content.decode()


def test_it_searches_with_the_scoped_retrieval(client, tenant, member):
    write(
        tenant, subject="user:20", key="shipping.preference", value="parcel locker", source__ref="a"
    )
    write(tenant, subject="user:21", key="language", value="german", source__ref="b")
    signed_in(client, member)
    html = client.get(url("memories", tenant), {"q": "parcel locker"}).content.decode()
    assert "user:20" in html
    assert "user:21" not in html
    assert "1 current memory matches" in html


def test_it_applies_filters_before_ranking_a_search(client, tenant, member):
    write(tenant, subject="user:30", value="parcel locker", source__ref="a")
    write(tenant, subject="user:31", value="parcel locker", source__ref="b")
    signed_in(client, member)
    html = client.get(url("memories", tenant), {"q": "parcel", "subject": "user:31"}).content
    assert b"user:31" in html
    assert b"user:30" not in html


def test_a_search_in_a_domain_shows_its_task_specific_memories_too(client, tenant, member):
    """Browsing a domain is a filter: an agent's general-to-specific rule would hide a
    memory written for one of the domain's task types."""
    write(tenant, subject="user:40", value="parcel locker", source__ref="a")  # commerce/checkout
    signed_in(client, member)
    html = client.get(url("memories", tenant), {"q": "parcel", "domain": "commerce"}).content
    assert b"user:40" in html


def test_it_says_when_a_search_finds_nothing(client, tenant, member):
    write(tenant)
    signed_in(client, member)
    html = client.get(url("memories", tenant), {"q": "zeppelin"}).content.decode()
    assert "No memory matches" in html
    assert "user:" not in html.split("No memory matches")[0].split("memory-results")[-1]


def test_it_shows_search_input_problems_as_form_errors(client, tenant, member):
    signed_in(client, member)
    response = client.get(url("memories", tenant), {"q": "x", "subject": "not a subject"})
    assert response.status_code == 200
    assert "kind:identifier" in response.content.decode()


def test_it_returns_only_the_results_to_htmx(client, tenant, member):
    write(tenant, subject="user:40")
    signed_in(client, member)
    response = client.get(url("memories", tenant), {"subject": "user:40"}, headers=HTMX)
    html = response.content.decode()
    assert "<html" not in html
    assert 'id="memory-results"' in html
    assert "user:40" in html


def test_it_pages_by_keyset_without_gaps_or_repeats(client, tenant, member, monkeypatch):
    monkeypatch.setattr(memory_views, "PAGE_SIZE", 2)
    for n in range(5):
        write(tenant, subject=f"user:{500 + n}", source__ref=f"r:{n}")
    signed_in(client, member)
    seen: list[str] = []
    next_url: str | None = url("memories", tenant)
    pages = 0
    while next_url:
        html = client.get(next_url).content.decode()
        seen += re.findall(r">(user:5\d\d) ·", html)
        match = re.search(r'<a href="([^"]+)"[^>]*rel="next"', html)
        next_url = match.group(1).replace("&amp;", "&") if match else None
        pages += 1
    assert pages == 3
    assert seen == [f"user:{500 + n}" for n in reversed(range(5))]
    # From the last page, "newer" leads back to the page before it.
    newer = re.search(r'<a href="([^"]+)"[^>]*rel="prev"', html)
    assert newer
    back = client.get(newer.group(1).replace("&amp;", "&")).content.decode()
    assert re.findall(r">(user:5\d\d) ·", back) == ["user:502", "user:501"]


def test_it_rejects_a_damaged_page_link(client, tenant, member):
    signed_in(client, member)
    response = client.get(url("memories", tenant), {"before": "garbage"})
    assert response.status_code == 200
    assert "damaged" in response.content.decode()


def test_it_lists_in_a_bounded_number_of_queries(
    client, tenant, member, django_assert_max_num_queries
):
    for n in range(3):
        write(tenant, subject=f"user:{600 + n}", source__ref=f"a:{n}")
    signed_in(client, member)
    client.get(url("memories", tenant))  # session, caches
    with django_assert_max_num_queries(14) as few:
        client.get(url("memories", tenant))
    for n in range(30):
        write(tenant, subject=f"user:{700 + n}", source__ref=f"b:{n}")
    with django_assert_max_num_queries(len(few.captured_queries)):
        response = client.get(url("memories", tenant))
    assert response.content.decode().count("version 1") == 33


# --- a memory's page ----------------------------------------------------------------------------


def test_it_shows_a_memory_with_its_provenance_chain(client, tenant, member):
    record = write(
        tenant,
        subject="user:80",
        value=NESTED,
        source={"kind": "tool_call", "ref": "crm:lookup:9", "tool_call_id": "call-77"},
    )
    with tenant_scope(tenant.pk):
        services.record_write(
            tenant=tenant,
            actor=Actor.system("second-source"),
            data=write_input(
                body(subject="user:80", value=NESTED, source={"kind": "document", "ref": "doc:5"})
            ),
        )
    embed(tenant, record)
    summary = summarise(tenant, record)
    signed_in(client, member)
    html = client.get(url("memory", tenant, record_id=record.pk)).content.decode()
    assert "Hauptstrasse 5" in html  # the value
    assert "Provisional" in html  # trust
    assert "crm:lookup:9" in html
    assert "call-77" in html
    assert "doc:5" in html  # the independent observation
    assert str(summary.pk) in html  # a summary citing it
    assert "hashing-256, 256 dimensions" in html  # its embedding
    assert "Expires" in html


def test_it_shows_the_version_history(client, tenant, member):
    first = write(tenant, subject="user:81", value="a", source__ref="r:1")
    second = write(tenant, subject="user:81", value="b", source__ref="r:2")
    signed_in(client, member)
    html = client.get(url("memory", tenant, record_id=second.pk)).content.decode()
    assert "v1" in html
    assert "v2" in html
    assert url("memory", tenant, record_id=first.pk) in html
    assert "open conflict" in html


def test_a_contenders_page_says_it_is_not_the_current_value(client, tenant, member, reviewer):
    current = write(tenant, subject="user:82", value="a", source__ref="r:1")
    contender = write(tenant, subject="user:82", value="b", source__ref="r:2")
    with tenant_scope(tenant.pk):
        conflict = contender.conflicts_as_contender.get()
    signed_in(client, member)
    html = client.get(url("memory", tenant, record_id=contender.pk)).content.decode()
    assert "Not the current value." in html
    assert url("memory", tenant, record_id=current.pk) in html
    assert "conflicts/" not in html  # a member cannot resolve it: no link to the queue
    current_page = client.get(url("memory", tenant, record_id=current.pk)).content.decode()
    assert "Not the current value." not in current_page
    signed_in(client, reviewer)
    html = client.get(url("memory", tenant, record_id=contender.pk)).content.decode()
    assert url("conflict", tenant, conflict_id=conflict.pk) in html


def test_it_offers_deletion_and_redaction_only_to_those_allowed(
    client, tenant, member, reviewer, auditor
):
    record = write(tenant)
    delete_link = url("memory-delete", tenant, record_id=record.pk)
    for person, allowed in ((member, True), (reviewer, False), (auditor, False)):
        signed_in(client, person)
        html = client.get(url("memory", tenant, record_id=record.pk)).content.decode()
        assert (delete_link in html) is allowed


@pytest.mark.parametrize("persona", ["reviewer", "auditor"])
def test_it_refuses_deletion_and_redaction_to_read_only_roles(client, tenant, persona, request):
    record = write(tenant)
    signed_in(client, request.getfixturevalue(persona))
    for name in ("memory-delete", "memory-redact"):
        assert client.get(url(name, tenant, record_id=record.pk)).status_code == 403
    response = client.post(
        url("memory-delete", tenant, record_id=record.pk), {"reason": "x", "nonce": "n"}
    )
    assert response.status_code == 403
    response = client.post(
        url("memory-redact", tenant, record_id=record.pk),
        {"parts": ["value"], "reason": "x", "nonce": "n"},
    )
    assert response.status_code == 403
    assert exists(tenant, record.pk)
    assert reload(tenant, record.pk).redaction_state == "none"


def test_it_shows_a_memory_in_a_bounded_number_of_queries(
    client, tenant, member, django_assert_max_num_queries
):
    record = write(tenant, subject="user:90", value="a", source__ref="r:0")
    signed_in(client, member)
    client.get(url("memory", tenant, record_id=record.pk))
    with django_assert_max_num_queries(20) as few:
        client.get(url("memory", tenant, record_id=record.pk))
    for n in range(5):
        write(tenant, subject="user:90", value=f"v{n}", source__ref=f"r:{n + 1}")
        embed(tenant, record, model=f"model-{n}")
        summarise(tenant, record)
    with tenant_scope(tenant.pk):
        for n in range(5):
            services.record_write(
                tenant=tenant,
                actor=Actor.system(f"source-{n}"),
                data=write_input(body(subject="user:90", value="a", source__ref=f"o:{n}")),
            )
    with django_assert_max_num_queries(len(few.captured_queries)):
        response = client.get(url("memory", tenant, record_id=record.pk))
    assert response.content.decode().count("model-") == 5


# --- deletion -----------------------------------------------------------------------------------


def test_it_previews_everything_a_deletion_takes(client, tenant, member):
    first = write(tenant, subject="user:100", value="a", source__ref="r:1")
    second = write(tenant, subject="user:100", value="b", source__ref="r:2")  # opens a conflict
    embed(tenant, first)
    embed(tenant, second)
    summary = summarise(tenant, first)
    with tenant_scope(tenant.pk):
        review_services.promotion_request_create(
            record=first, actor=WRITER, evidence=None, reason="seen twice"
        )
    signed_in(client, member)
    html = client.get(url("memory-delete", tenant, record_id=first.pk)).content.decode()
    assert "2 versions" in html
    assert "2 embeddings" in html
    assert "2 \N{MULTIPLICATION SIGN} hashing-256" in html
    assert "1 summary invalidated" in html
    assert str(summary.pk) in html
    assert "1 promotion request</strong>, 1 still open" in html
    assert "1 conflict</strong>, 1 still open" in html
    assert "Delete permanently" in html
    # A dry run: nothing changed.
    assert exists(tenant, first.pk)
    assert exists(tenant, second.pk)
    with tenant_scope(tenant.pk):
        assert Summary.objects.get(pk=summary.pk).valid


def test_it_previews_a_deletion_in_a_bounded_number_of_queries(
    client, tenant, member, django_assert_max_num_queries
):
    record = write(tenant, subject="user:110", value="a", source__ref="r:0")
    embed(tenant, record)
    summarise(tenant, record)
    signed_in(client, member)
    client.get(url("memory-delete", tenant, record_id=record.pk))
    # The preview reads each relation of the deletion definition (apps.core.deletion) once;
    # what matters is that more versions add none.
    with django_assert_max_num_queries(40) as few:
        client.get(url("memory-delete", tenant, record_id=record.pk))
    for n in range(4):
        version = write(tenant, subject="user:110", value=f"v{n}", source__ref=f"r:{n + 1}")
        embed(tenant, version)
        summarise(tenant, record, version)
    with django_assert_max_num_queries(len(few.captured_queries)):
        response = client.get(url("memory-delete", tenant, record_id=record.pk))
    assert "5 versions" in response.content.decode()


def test_it_deletes_and_shows_the_receipt(client, tenant, member):
    record = write(tenant, subject="user:120", value=NESTED)
    embed(tenant, record)
    summary = summarise(tenant, record)
    signed_in(client, member)
    response = delete_post(client, tenant, record)
    [receipt] = receipts(tenant)
    assert response.status_code == 302
    assert response["Location"] == url("receipt", tenant, receipt_id=receipt.pk)
    assert not exists(tenant, record.pk)
    with tenant_scope(tenant.pk):
        assert not Summary.objects.get(pk=summary.pk).valid
    assert receipt.reason == "asked by the customer"
    assert receipt.requested_by_label == member.get_username()
    [event] = events(tenant, "record.delete")
    assert event.actor_label == member.get_username()

    page = client.get(response["Location"]).content.decode()
    assert str(record.pk) in page
    assert receipt.content_digest in page
    assert "summaries invalidated" in page
    assert "Hauptstrasse" not in page  # the receipt never shows the content


def test_it_answers_htmx_deletion_with_a_client_redirect(client, tenant, member):
    record = write(tenant)
    signed_in(client, member)
    panel = client.get(url("memory-delete", tenant, record_id=record.pk), headers=HTMX)
    assert "<html" not in panel.content.decode()
    assert 'id="delete-panel"' in panel.content.decode()
    response = client.post(
        url("memory-delete", tenant, record_id=record.pk),
        {"reason": "gone", "nonce": nonce_of(panel.content.decode())},
        headers=HTMX,
    )
    [receipt] = receipts(tenant)
    assert response.status_code == 200
    assert response["HX-Redirect"] == url("receipt", tenant, receipt_id=receipt.pk)


def test_it_treats_a_repeated_confirmation_as_harmless(client, tenant, member):
    record = write(tenant)
    signed_in(client, member)
    page = client.get(url("memory-delete", tenant, record_id=record.pk))
    data = {"reason": "duplicate click", "nonce": nonce_of(page.content.decode())}
    first = client.post(url("memory-delete", tenant, record_id=record.pk), data)
    second = client.post(url("memory-delete", tenant, record_id=record.pk), data)
    [receipt] = receipts(tenant)
    assert first.status_code == second.status_code == 302
    assert second["Location"] == url("receipt", tenant, receipt_id=receipt.pk)
    assert len(events(tenant, "record.delete")) == 1
    assert "already been deleted" in client.get(second["Location"]).content.decode()


def test_it_finds_the_receipt_of_a_record_deleted_through_another_version(client, tenant, member):
    first = write(tenant, subject="user:130", value="a", source__ref="r:1")
    second = write(tenant, subject="user:130", value="b", source__ref="r:2")
    signed_in(client, member)
    page = client.get(url("memory-delete", tenant, record_id=first.pk))
    stale_nonce = nonce_of(page.content.decode())
    delete_post(client, tenant, second)
    [receipt] = receipts(tenant)
    response = client.post(
        url("memory-delete", tenant, record_id=first.pk),
        {"reason": "again", "nonce": stale_nonce},
    )
    assert response.status_code == 302
    assert response["Location"] == url("receipt", tenant, receipt_id=receipt.pk)


def test_it_refuses_to_delete_a_record_under_legal_hold(client, tenant, member):
    record = write(tenant, subject="user:140")
    signed_in(client, member)
    opened_before = client.get(url("memory-delete", tenant, record_id=record.pk))
    hold(tenant, "user:140")
    page = client.get(url("memory-delete", tenant, record_id=record.pk)).content.decode()
    assert "A legal hold keeps this memory" in page
    assert "litigation 42" in page
    assert "Delete permanently" not in page
    # A page opened before the hold was placed is refused, clearly.
    response = client.post(
        url("memory-delete", tenant, record_id=record.pk),
        {"reason": "try anyway", "nonce": nonce_of(opened_before.content.decode())},
    )
    assert response.status_code == 200
    assert "Not deleted:" in response.content.decode()
    assert "legal hold" in response.content.decode()
    assert exists(tenant, record.pk)
    assert receipts(tenant) == []


def test_it_requires_a_reason_to_delete(client, tenant, member):
    record = write(tenant)
    signed_in(client, member)
    page = client.get(url("memory-delete", tenant, record_id=record.pk))
    response = client.post(
        url("memory-delete", tenant, record_id=record.pk),
        {"reason": "   ", "nonce": nonce_of(page.content.decode())},
    )
    assert response.status_code == 200
    assert "errorlist" in response.content.decode()
    assert exists(tenant, record.pk)


def test_it_hides_another_tenants_receipt(client, tenant, other_tenant, member, outsider):
    record = write(tenant)
    signed_in(client, member)
    delete_post(client, tenant, record)
    [receipt] = receipts(tenant)
    signed_in(client, outsider)
    response = client.get(url("receipt", other_tenant, receipt_id=receipt.pk))
    assert response.status_code == 404


def test_it_lets_an_auditor_read_a_receipt(client, tenant, member, auditor):
    record = write(tenant)
    signed_in(client, member)
    delete_post(client, tenant, record)
    [receipt] = receipts(tenant)
    signed_in(client, auditor)
    assert client.get(url("receipt", tenant, receipt_id=receipt.pk)).status_code == 200


# --- redaction ----------------------------------------------------------------------------------


def test_it_offers_each_part_of_the_value_for_redaction(client, tenant, member):
    record = write(tenant, value=NESTED)
    signed_in(client, member)
    html = client.get(url("memory-redact", tenant, record_id=record.pk)).content.decode()
    for path in ("value", "value.address", "value.address.street", "value.carrier"):
        assert f'value="{path}"' in html


def test_it_redacts_the_chosen_parts(client, tenant, member):
    record = write(tenant, value=NESTED)
    embed(tenant, record)
    summary = summarise(tenant, record)
    signed_in(client, member)
    response = redact_post(client, tenant, record, ["value.address.street"])
    assert response.status_code == 302
    assert response["Location"] == url("memory", tenant, record_id=record.pk)
    redacted = reload(tenant, record.pk)
    assert redacted.value["address"]["street"] == "[REDACTED]"
    assert redacted.value["carrier"] == "dhl"
    assert "Hauptstrasse" not in redacted.content
    assert redacted.redaction_state == "applied"
    with tenant_scope(tenant.pk):
        assert not Summary.objects.get(pk=summary.pk).valid
    [event] = events(tenant, "record.redact")
    assert event.actor_label == member.get_username()
    assert "Redacted value.address.street" in client.get(response["Location"]).content.decode()


def test_it_answers_htmx_redaction_with_a_client_redirect(client, tenant, member):
    record = write(tenant, value=NESTED)
    signed_in(client, member)
    response = redact_post(client, tenant, record, ["value"], **HTMX)
    assert response["HX-Redirect"] == url("memory", tenant, record_id=record.pk)
    assert reload(tenant, record.pk).value == "[REDACTED]"


def test_it_requires_a_part_to_redact(client, tenant, member):
    record = write(tenant, value=NESTED)
    signed_in(client, member)
    response = redact_post(client, tenant, record, [], **HTMX)
    html = response.content.decode()
    assert "Choose at least one part" in html
    assert "<html" not in html
    assert reload(tenant, record.pk).value == NESTED


def test_it_rejects_a_part_the_value_does_not_have(client, tenant, member):
    record = write(tenant, value=NESTED)
    signed_in(client, member)
    response = redact_post(client, tenant, record, ["value.phone"])
    assert response.status_code == 200
    assert "errorlist" in response.content.decode()
    assert reload(tenant, record.pk).value == NESTED


def test_it_refuses_to_redact_a_record_under_legal_hold(client, tenant, member):
    record = write(tenant, subject="user:150", value=NESTED)
    signed_in(client, member)
    opened_before = client.get(url("memory-redact", tenant, record_id=record.pk))
    hold(tenant, "user:150")
    form = client.get(url("memory-redact", tenant, record_id=record.pk)).content.decode()
    assert "A legal hold keeps this memory as it is" in form
    response = client.post(
        url("memory-redact", tenant, record_id=record.pk),
        {"parts": ["value"], "reason": "try", "nonce": nonce_of(opened_before.content.decode())},
    )
    assert "Not redacted:" in response.content.decode()
    assert reload(tenant, record.pk).value == NESTED


def test_it_applies_a_repeated_redaction_once(client, tenant, member):
    record = write(tenant, value=NESTED)
    signed_in(client, member)
    page = client.get(url("memory-redact", tenant, record_id=record.pk))
    data = {"parts": ["value.carrier"], "reason": "twice", "nonce": nonce_of(page.content.decode())}
    client.post(url("memory-redact", tenant, record_id=record.pk), data)
    again = client.post(url("memory-redact", tenant, record_id=record.pk), data)
    assert again.status_code == 302
    assert len(events(tenant, "record.redact")) == 1


# --- scopes -------------------------------------------------------------------------------------

SUPPORT = {"domain": "support", "task_type": "chat"}
LEGAL = {"domain": "legal", "task_type": "review"}


def test_the_subject_page_groups_facts_by_scope(client, tenant, member):
    write(tenant, subject="user:88", key="answer.style", value="short", scope=SUPPORT)
    write(tenant, subject="user:88", key="answer.style", value="complete", scope=LEGAL)
    write(tenant, subject="user:99", key="answer.style", value="elsewhere", scope=LEGAL)
    signed_in(client, member)
    response = client.get(url("memory-subject", tenant, subject="user:88"))
    assert response.status_code == 200
    html = response.content.decode()
    legal = html.index('Scope <span class="mono">legal')
    support = html.index('Scope <span class="mono">support')
    assert legal < html.index("&quot;complete&quot;") < support < html.index("&quot;short&quot;")
    assert "elsewhere" not in html
    assert "Provenance and history" in html


def test_the_subject_page_of_another_tenant_shows_nothing(client, tenant, other_tenant, outsider):
    write(tenant, subject="user:88", key="answer.style", value="short", scope=SUPPORT)
    signed_in(client, outsider)
    response = client.get(url("memory-subject", other_tenant, subject="user:88"))
    assert response.status_code == 200
    assert "short" not in response.content.decode()
    assert client.get(url("memory-subject", tenant, subject="user:88")).status_code in {403, 404}


def test_the_scopes_page_lists_scopes_with_counts(client, tenant, member):
    write(tenant, subject="user:1", key="answer.style", value="short", scope=SUPPORT)
    write(tenant, subject="user:2", key="answer.style", value="short", scope=SUPPORT)
    write(tenant, subject="user:2", key="tone", value="formal", scope=SUPPORT)
    write(tenant, subject="user:1", key="answer.style", value="complete", scope=LEGAL)
    signed_in(client, member)
    html = client.get(url("memory-scopes", tenant)).content.decode()
    rows = re.findall(r"<tr>(.*?)</tr>", html, flags=re.S)
    cells = {
        re.search(r'">(\w+)</a>', row).group(1): re.findall(r"<td>(\d+)</td>", row)
        for row in rows
        if "</a>" in row
    }
    assert cells == {"legal": ["1", "1"], "support": ["3", "2"]}


def test_the_review_queue_shows_each_conflict_in_its_scope(client, tenant, reviewer):
    write(tenant, subject="user:5", key="answer.style", value="short", scope=SUPPORT)
    write(
        tenant,
        subject="user:5",
        key="answer.style",
        value="terse",
        scope=SUPPORT,
        source__ref="other",
    )
    write(tenant, subject="user:5", key="answer.style", value="complete", scope=LEGAL)
    signed_in(client, reviewer)
    html = client.get(reverse("console:conflicts", kwargs={"tenant_slug": tenant.slug})).content
    text = html.decode()
    assert text.count("conflict-item") >= 1
    assert 'title="Scope">support/chat' in text
    assert "complete" not in text  # the legal value is its own fact, never paired
