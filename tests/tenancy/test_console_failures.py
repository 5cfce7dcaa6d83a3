"""Failures the console shows instead of hiding: an expired session during an htmx action
goes to the sign-in page and back, and a CSRF failure is a console page with a way back."""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import pytest
from django.test import Client
from django.urls import reverse

from apps.tenancy.models import Tenant

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


def review_url(tenant: Tenant) -> str:
    return reverse("console:review", kwargs={"tenant_slug": tenant.slug})


def test_it_sends_an_expired_htmx_session_to_the_login_page_and_back(client, tenant):
    queue = review_url(tenant)
    response = client.post(
        f"{queue}00000000-0000-0000-0000-000000000000/approve/",
        {"reason": ""},
        headers={**HTMX, "HX-Current-URL": f"http://testserver{queue}?domain=commerce"},
    )
    # Not the sign-in page pasted into the item: a whole-page visit to it, coming back after.
    assert response.status_code == 200
    assert response.content == b""
    target = urlparse(response["HX-Redirect"])
    assert target.path == reverse("console:login")
    assert parse_qs(target.query)["next"] == [f"{queue}?domain=commerce"]


def test_it_never_sends_an_expired_session_back_off_site(client, tenant):
    response = client.get(
        review_url(tenant), headers={**HTMX, "HX-Current-URL": "https://evil.example/phish"}
    )
    target = urlparse(response["HX-Redirect"])
    assert parse_qs(target.query)["next"] == [review_url(tenant)]


def test_it_still_redirects_a_plain_request_without_a_session(client, tenant):
    response = client.get(review_url(tenant))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("console:login"))


def test_it_shows_a_csrf_failure_in_the_console_frame_with_a_way_back(tenant, reviewer):
    client = Client(enforce_csrf_checks=True)
    client.force_login(reviewer)
    queue = review_url(tenant)
    response = client.post(
        f"{queue}00000000-0000-0000-0000-000000000000/approve/",
        {"reason": ""},
        headers={"Referer": f"http://testserver{queue}"},
    )
    html = response.content.decode()
    assert response.status_code == 403
    assert "Memory Console" in html
    assert 'class="topbar"' in html
    assert "This form has expired" in html
    assert f'href="{queue}"' in html
    assert "data-failure-message" in html


def test_it_offers_the_console_home_when_a_csrf_failure_came_from_elsewhere(reviewer):
    client = Client(enforce_csrf_checks=True)
    client.force_login(reviewer)
    response = client.post(
        reverse("console:logout"), headers={"Referer": "https://evil.example/form"}
    )
    html = response.content.decode()
    assert response.status_code == 403
    assert "evil.example" not in html
    assert f'href="{reverse("console:home")}"' in html


def test_it_tells_the_sign_in_page_that_a_change_without_a_session_was_not_saved(client, tenant):
    queue = review_url(tenant)
    response = client.post(
        f"{queue}00000000-0000-0000-0000-000000000000/approve/",
        {"reason": "checked"},
        headers={**HTMX, "HX-Current-URL": f"http://testserver{queue}"},
    )
    target = urlparse(response["HX-Redirect"])
    assert parse_qs(target.query)["unsaved"] == ["1"]
    html = client.get(response["HX-Redirect"]).content.decode()
    assert "that change was not saved" in html
    # A page visited without a session lost nothing: no such warning.
    plain = client.get(client.get(queue)["Location"]).content.decode()
    assert "not saved" not in plain


def test_a_refused_page_is_logged_in_one_line_without_a_traceback(client, member, tenant, caplog):
    client.force_login(member)
    caplog.clear()
    # A member's role does not allow the evaluation page: 403.
    refused = reverse("console:evaluation", kwargs={"tenant_slug": tenant.slug})
    assert client.get(refused).status_code == 403
    [record] = [r for r in caplog.records if r.name == "django.request"]
    assert record.getMessage() == f"Forbidden (Permission denied): {refused}"
    assert record.exc_info is None
    assert "Traceback" not in caplog.text
