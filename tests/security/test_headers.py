"""Response headers: nothing from the API is cached, the console loads only its own files."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

pytestmark = pytest.mark.django_db


def test_it_forbids_caching_api_responses(agent):
    for response in (
        agent.get("/api/v1/me"),
        agent.get("/api/v1/records/00000000-0000-0000-0000-000000000000"),
        Client().get("/api/v1/me"),
    ):
        assert "no-store" in response["Cache-Control"]


def test_it_sets_a_content_security_policy_on_the_console(client, reviewer, tenant):
    client.force_login(reviewer)
    response = client.get(reverse("console:dashboard", kwargs={"tenant_slug": tenant.slug}))
    assert response.status_code == 200
    policy = response["Content-Security-Policy"]
    assert "default-src 'self'" in policy
    assert "script-src 'self'" in policy
    assert "frame-ancestors 'none'" in policy
    assert "unsafe-inline" not in policy


def test_it_has_no_inline_script_or_style_on_the_console(client, reviewer, tenant):
    client.force_login(reviewer)
    response = client.get(reverse("console:dashboard", kwargs={"tenant_slug": tenant.slug}))
    html = response.content.decode()
    assert "<style" not in html
    assert ' style="' not in html
    for script in html.split("<script")[1:]:
        assert " src=" in script.split(">", 1)[0], "every script is a file"
