"""Guessing credentials is throttled: API tokens per client address, console and admin
passwords per account and address."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import Client
from django.urls import reverse

from tests.api.support import assert_problem

pytestmark = pytest.mark.django_db


def bad_token(client: Client, address: str = "127.0.0.1") -> int:
    response = client.get(
        "/api/v1/me", headers={"Authorization": "Bearer mc_wrong"}, REMOTE_ADDR=address
    )
    return response.status_code


def test_it_answers_429_after_too_many_bad_tokens_from_one_address(agent):
    client = Client()
    statuses = [bad_token(client) for _ in range(settings.API_AUTH_FAILURE_LIMIT)]
    assert statuses == [401] * settings.API_AUTH_FAILURE_LIMIT
    response = client.get("/api/v1/me", headers={"Authorization": "Bearer mc_wrong"})
    body = assert_problem(response, 429)
    assert "Too many failed authentication attempts" in body["detail"]
    assert response["Retry-After"] == str(settings.API_AUTH_FAILURE_WINDOW)


def test_it_refuses_even_a_valid_token_from_a_throttled_address(agent):
    client = Client()
    for _ in range(settings.API_AUTH_FAILURE_LIMIT):
        bad_token(client)
    response = client.get("/api/v1/me", headers={"Authorization": f"Bearer {agent.token}"})
    assert_problem(response, 429)


def test_it_throttles_per_address(agent):
    client = Client()
    for _ in range(settings.API_AUTH_FAILURE_LIMIT):
        bad_token(client, "10.0.0.7")
    assert bad_token(client, "10.0.0.7") == 429
    assert agent.get("/api/v1/me").status_code == 200


def test_it_does_not_count_successful_requests(agent):
    for _ in range(settings.API_AUTH_FAILURE_LIMIT + 5):
        assert agent.get("/api/v1/me").status_code == 200


def sign_in(client: Client, username: str, password: str, path: str) -> object:
    return client.post(path, {"username": username, "password": password})


@pytest.mark.parametrize("path", ["console:login", "admin:login"])
def test_it_locks_a_login_out_after_too_many_wrong_passwords(reviewer, path):
    reviewer.set_password("the-right-password")
    reviewer.is_staff = path == "admin:login"
    reviewer.save()
    client = Client()
    url = reverse(path)
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        response = sign_in(client, reviewer.username, "wrong", url)
        assert response.status_code == 200  # the form again, with its error
    locked = sign_in(client, reviewer.username, "wrong", url)
    assert locked.status_code == 429
    assert "Too many sign-in attempts" in locked.content.decode()
    # The right password does not get through while the lockout lasts.
    again = sign_in(client, reviewer.username, "the-right-password", url)
    assert again.status_code == 429
    assert "_auth_user_id" not in client.session


def test_it_lets_a_person_in_after_fewer_wrong_passwords_than_the_limit(reviewer):
    reviewer.set_password("the-right-password")
    reviewer.save()
    client = Client()
    url = reverse("console:login")
    for _ in range(settings.AXES_FAILURE_LIMIT - 2):
        sign_in(client, reviewer.username, "wrong", url)
    response = sign_in(client, reviewer.username, "the-right-password", url)
    assert response.status_code == 302
