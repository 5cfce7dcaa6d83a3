"""Agents with the actions the review tests need, besides the project-wide personas."""

from __future__ import annotations

import pytest

from tests.conftest import Agent, make_agent


@pytest.fixture
def review_agent(tenant) -> Agent:
    """A credential with the ``review`` action (and write, to be a writer in some tests)."""
    return make_agent(tenant, "read,write,review", name="reviewer-bot")


@pytest.fixture
def delete_agent(tenant) -> Agent:
    return make_agent(tenant, "read,delete", name="deleter-bot")
