"""While the database is away the API answers 503 problem+json (and the console a 503 page),
never a 500: the client should retry, nothing was changed."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.db import connection
from django.test import Client

from .support import assert_problem

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def database_away() -> Iterator[None]:
    """Point the connection at a server that does not exist, as if PostgreSQL were down."""
    connection.close()
    saved = dict(connection.settings_dict)
    connection.settings_dict["HOST"] = "/nonexistent-socket-dir"
    connection.settings_dict["PORT"] = "1"
    try:
        yield
    finally:
        connection.close()
        connection.settings_dict.clear()
        connection.settings_dict.update(saved)


def test_it_answers_503_to_an_agent_while_the_database_is_away(agent, database_away):
    for response in (
        agent.get("/api/v1/records"),
        agent.post("/api/v1/records", {"key": "k"}),
        Client().get("/api/v1/records", headers={"Authorization": "Bearer mc_x"}),
    ):
        body = assert_problem(response, 503)
        assert "database is unavailable" in body["detail"]
        assert response["Retry-After"] == "5"


def test_it_answers_503_on_health_while_the_database_is_away(database_away):
    assert_problem(Client().get("/api/v1/health"), 503)
    assert_problem(Client().get("/api/v1/health/ready"), 503)
    # Liveness asks nothing of the database: a web process is not restarted for its absence.
    live = Client().get("/api/v1/health/live")
    assert (live.status_code, live.json()) == (200, {"status": "alive"})


def test_it_shows_the_console_a_503_page_while_the_database_is_away(reviewer, database_away):
    response = Client().get("/console/login/")
    assert response.status_code == 503
    assert "The database is unavailable" in response.content.decode()
